"""PTL090 unused-noqa."""
from __future__ import annotations

from ptlint.model import Safety
from ptlint.rule import Rule


class UnusedNoqa(Rule):
    """
    ## What it does
    Flags `# noqa: CODES` directives whose ptlint codes (or rule names) suppress
    no finding on their line: the rule found nothing there (`unused`), is not
    enabled for the file (`non-enabled`), or does not exist (`unknown`). Codes of
    other tools (`# noqa: E501`) and blanket `# noqa` directives are left alone:
    they may serve another linter. Off by default, as ruff's `unused-noqa`
    (RUF100) is; enable it with `--extend-select PTL090`.

    The suppression comments themselves are read by the engine, so this rule
    has no visitor of its own: the engine reports it after filtering the
    findings of the other rules.

    ## Why is this bad?
    A stale suppression hides the next finding that appears on its line, and
    tells the reader that the line has a problem it no longer has.

    ## Example
    ```python
    import torch
    x = torch.zeros(3, device="cuda")  # noqa: PTL101
    ```

    Use instead:
    ```python
    import torch
    x = torch.zeros(3, device="cuda")
    ```

    ## Fix safety
    Safe: the fix removes the unused codes from the directive, or the directive
    when none is left, and keeps every other comment text (a reason written after
    the codes stays as a plain comment). Code behaves the same. A code is also
    removed when its rule is merely not enabled for the file, so a run with a
    narrower selection removes suppressions another selection needs: fix with the
    selection the project uses.
    """

    code = "PTL090"
    message = "Unused `noqa` directive"
    fix_title = "Remove the unused codes"
    fix_safety = Safety.SAFE
    default_enabled = False
    tags = ("suppression",)
