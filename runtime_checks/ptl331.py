"""PTL331 save-whole-module: the state dict loads with weights_only=True."""
CHANGES = {"loads_with_weights_only": "a pickled module needs weights_only=False; its state_dict does not"}
