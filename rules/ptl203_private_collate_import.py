"""PTL203 private-collate-import."""
from __future__ import annotations

from packaging.version import Version

from ptlint.model import Safety
from ptlint.rules._symbols import Symbol, SymbolRule, table

_PRIVATE = "torch.utils.data._utils.collate"


def _symbols(public: str) -> dict[str, Symbol]:
    return table(Symbol(f"{_PRIVATE}.{name}", "private", f"{public}.{name}", fix="rename")
                 for name in ("default_collate", "default_convert"))


class PrivateCollateImport(SymbolRule):
    """
    ## What it does
    Flags imports, calls and other references of `default_collate` and
    `default_convert` through the private module
    `torch.utils.data._utils.collate` (for example
    `collate_fn=torch.utils.data._utils.collate.default_collate`).

    The public names are `torch.utils.data.default_collate` and
    `torch.utils.data.default_convert` (from torch 1.11; for older target
    versions the rule suggests `torch.utils.data.dataloader.*`). The
    extension points that are documented in the private module (`collate`,
    `default_collate_fn_map`) are not flagged.

    ## Why is this bad?
    `_utils` is private: it can be moved or changed in any release without a
    deprecation period, while the public names are kept stable.

    ## Example
    ```python
    from torch.utils.data._utils.collate import default_collate
    ```

    Use instead:
    ```python
    from torch.utils.data import default_collate
    ```

    ## Fix safety
    Safe: the public names are the same function objects.
    """

    code = "PTL203"
    message = "`default_collate`/`default_convert` used from a private module"
    fix_title = "Use the public name"
    fix_safety = Safety.SAFE
    requires_text = ("_utils",)
    statuses = ("private",)

    @classmethod
    def symbols_at(cls, version: Version | None) -> dict[str, Symbol]:
        old = version is not None and version < Version("1.11")
        return _symbols("torch.utils.data.dataloader" if old else "torch.utils.data")

    def describe(self, symbol: Symbol) -> str:
        return f"`{symbol.name}` is private; use `{symbol.replacement}`"
