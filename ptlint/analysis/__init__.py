"""What a file's code means, for the rules: the node walk (`walk`), name
resolution (`names`: imports, aliases, shadowing), and the semantic model of a
file's training code (`semantic`, with `contexts`, `bindings`, `statements`,
and the vocabulary of `training` and `dataflow`) that rules query instead of
tracking context themselves.

May import: `ptlint.model`, `ptlint.rule` and LibCST. Never the engine, I/O,
output or verify packages.
"""
