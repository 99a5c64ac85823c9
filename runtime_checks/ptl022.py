"""PTL022 double-softmax: the loss and its gradients are those of one softmax."""
CHANGES = {
    "loss": "bad applies softmax twice, so the loss is squashed",
    "grad_norm": "and its gradients shrink",
    "loss_of_confident_correct_logits": "bad cannot reach a small loss even for perfect logits",
}
