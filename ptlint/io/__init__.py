"""Files in and out: discovery, decoding source text byte for byte, atomic
writes, notebooks and IPython syntax, diffs, and the results cache.

May import: `ptlint.model`, `ptlint.config`, `ptlint.config_files`. Never LibCST, the engine, rules,
output or verify packages.
"""
