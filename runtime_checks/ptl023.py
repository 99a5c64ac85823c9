"""PTL023 functional-dropout-ignores-training: dropout turns off in eval mode."""
CHANGES = {
    "eval_first": "bad keeps dropping units in eval mode",
    "eval_second": "so two eval passes give different outputs",
    "eval_deterministic": "fixed eval is deterministic (1.0), bad is not (0.0)",
}
