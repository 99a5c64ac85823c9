"""PTL005 backward-inside-autocast: moving backward() out of the autocast block
keeps the gradients.

main(device, steps=3) trains under CPU bfloat16 autocast (CUDA: float16 with a
GradScaler) and returns {"loss", "grads": [unscaled gradients of the last step],
"params"}. Gradients, loss and parameters must agree within the tolerance below
(backward ops run in the dtype autocast chose for their forward op, so they are
usually identical).
"""
COMPARED = "gradients, loss and parameters under autocast (CPU bfloat16, CUDA float16 + GradScaler)"
RTOL, ATOL = 1e-2, 1e-3  # half-precision rounding, of each result's largest value
