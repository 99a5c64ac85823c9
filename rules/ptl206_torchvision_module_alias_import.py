"""PTL206 torchvision-module-alias-import."""
from __future__ import annotations

import libcst as cst

from ptlint.model import Safety
from ptlint.analysis.names import dotted
from ptlint.rule import Rule


def _split(alias: cst.ImportAlias) -> tuple[str, str] | None:
    """(parent, name) for `torchvision[.a].name as name`, else None."""
    full = dotted(alias.name)
    if full is None or not full.startswith("torchvision.") or alias.asname is None:
        return None
    if not isinstance(alias.asname.name, cst.Name):
        return None
    parent, _, name = full.rpartition(".")
    return (parent, name) if alias.asname.name.value == name else None


class TorchvisionModuleAliasImport(Rule):
    """
    ## What it does
    Flags `import torchvision.<module> as <module>` (the alias repeats the
    module's own name), e.g. `import torchvision.models as models` or
    `import torchvision.transforms.v2 as v2`.

    Off by default: it is a style rule (TorchFix's TOR203). Enable it with
    `--extend-select PTL206`.

    ## Why is this bad?
    The alias only restates the name: `from torchvision import models` says
    the same thing directly and binds the same module. It is the form
    torchvision's documentation uses.

    ## Example
    ```python
    import torchvision.models as models
    ```

    Use instead:
    ```python
    from torchvision import models
    ```

    ## Fix safety
    Safe: both statements import the same submodule and bind only its name.
    A statement that imports several such modules from the same package
    becomes one `from` import (`import torchvision.models as models,
    torchvision.datasets as datasets` → `from torchvision import models,
    datasets`); a statement that mixes them with other imports is reported
    without a fix.
    """

    code = "PTL206"
    message = "`import torchvision.<module> as <module>`: use `from torchvision import <module>`"
    fix_title = "Use a `from` import"
    fix_safety = Safety.SAFE
    default_enabled = False
    tags = ("style",)
    requires_text = ("torchvision.",)

    def visit_Import(self, node: cst.Import) -> None:
        found = [_split(alias) for alias in node.names]
        if not any(found):
            return
        parents = {f[0] for f in found if f}
        if all(found) and len(parents) == 1:
            new = cst.ImportFrom(module=cst.parse_expression(parents.pop()),
                                 names=[cst.ImportAlias(name=cst.Name(f[1])) for f in found],
                                 semicolon=node.semicolon)
            self.report(node, message=self._message(found), replacement=new)
            return
        self.report(node, message=self._message([f for f in found if f]))

    @staticmethod
    def _message(found) -> str:
        parent, name = found[0]
        return f"`import {parent}.{name} as {name}`: use `from {parent} import {name}`"
