"""PTL120 grad-scaler-in-loop: the scaler keeps its state across steps."""
CHANGES = {
    "weights_changed": "bad's fresh scaler skips the step after every overflow, so the weights never move",
    "final_scale": "fixed's scale backs off and settles; bad's restarts at 65536 every step",
}
