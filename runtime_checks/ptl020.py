"""PTL020 clip-grad-without-unscale: the fix clips the true gradients."""
CHANGES = {
    "last_grad_norm_seen_by_clip": "bad clips the scaled gradients (norm times the scale); fixed sees the true norm",
    "weight": "so the clipped update, and the weights after it, differ",
}
