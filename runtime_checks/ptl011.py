"""PTL011 checkpoint-without-use-reentrant: same gradients where both reach."""
CHANGES = {
    "block_grad_is_none": "with use_reentrant=False gradients also reach a block whose inputs do not require grad",
}
