"""PTL024 forward-called-directly: calling the module runs its hooks."""
CHANGES = {"hook_calls": "bad skips the forward hooks; fixed runs them"}
