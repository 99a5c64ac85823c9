"""What a file's code means, for the rules: the node walk, name resolution
(imports, aliases, shadowing) and the dataflow and training-loop facts rules
query.

May import: `ptlint.model`, `ptlint.rule` and LibCST. Never the engine, I/O,
output or verify packages.
"""
