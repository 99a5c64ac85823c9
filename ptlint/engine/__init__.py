"""One file, from text to findings and fixes.

- `guard`: is it Python, and safe for LibCST to parse (PTL000)?
- `lint`: parse once, run every enabled rule in one walk (`lint_text`).
- `locate`: reports to findings, with positions and edit texts.
- `reparse`: an editor's document parsed again only where it changed
  (`Reparser`, which `lint_text` takes).
- `suppress`: `# noqa` and file-wide suppression, read from comment tokens;
  unused directives (PTL090) and `--add-noqa`.
- `safety`: what every fix must respect before it is offered (comments kept,
  imports that reach their use, quotes that fit an f-string).
- `fix`: apply fixes until nothing changes, re-parsing each pass (`fix_text`).
- `cells`: a notebook's code cells as one module, and positions mapped back;
  `notebook`: the cells linted and fixed as one module.
- `job`: what one file's work asks for and gives back; `run`: many files,
  through the cache; `pool`: the worker processes that run them in parallel.

May import: `ptlint.analysis`, `ptlint.io`, `ptlint.model`, `ptlint.rule`,
`ptlint.config`, `ptlint.config_files` (and the generated `ptlint._catalog`). Never
the CLI, output or verify packages. This package's `__init__` imports nothing, so that a run
answered from the cache never loads LibCST.
"""
