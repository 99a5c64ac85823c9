"""The light name resolver: scopes open and close where Python's do."""
from __future__ import annotations

import libcst as cst

from ptlint.analysis.names import NameResolver, ScopeExit


def _resolve_all(source: str, dotted: str) -> list[str | None]:
    """What every `dotted` expression in `source` resolves to, in order."""
    resolver = NameResolver()
    seen: list[str | None] = []

    class Probe(cst.BatchableCSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            if cst.Module([]).code_for_node(node) == dotted:
                seen.append(resolver.qualified_name(node))

    cst.MetadataWrapper(cst.parse_module(source)).visit_batched(
        [resolver, Probe(), ScopeExit(resolver)])
    return seen


def test_every_scope_hook_is_registered():
    # LibCST keeps visitor methods by `__name__`: aliases would be dropped
    resolver = NameResolver()
    leaves = set(ScopeExit(resolver).get_visitors())
    visits = set(resolver.get_visitors())
    for kind in ("FunctionDef", "Lambda", "ClassDef", "ListComp", "SetComp", "DictComp",
                 "GeneratorExp"):
        assert f"leave_{kind}" in leaves
    for kind in ("ListComp", "SetComp", "DictComp", "GeneratorExp"):
        assert f"visit_{kind}" in visits


def test_a_parameter_shadows_only_inside_its_function():
    source = (
        "import torch\n"
        "def f(torch):\n"
        "    return torch.nn\n"
        "x = torch.nn\n"
        "y = [torch for torch in range(3)]\n"
        "z = torch.nn\n"
    )
    assert _resolve_all(source, "torch.nn") == [None, "torch.nn", "torch.nn"]


def test_a_star_import_brings_torch_when_the_file_does_not_bind_it():
    # `from utils import *` where utils imported torch: `torch` can be nothing else
    star = "from utils import *\nx = torch.nn\ndef f():\n    return torch.nn\n"
    assert _resolve_all(star, "torch.nn") == ["torch.nn", "torch.nn"]
    # the file's own binding wins, before or after the star import
    assert _resolve_all("import numpy as torch\nfrom utils import *\nx = torch.nn\n",
                        "torch.nn") == ["numpy.nn"]
    assert _resolve_all("from utils import *\ndef f(torch):\n    return torch.nn\n",
                        "torch.nn") == [None]
    # without a star import an unbound `torch` stays unknown
    assert _resolve_all("x = torch.nn\n", "torch.nn") == [None]


def test_rules_see_torch_through_a_star_import(cli, tmp_path):
    (tmp_path / "utils.py").write_text("import torch\n")
    (tmp_path / "train.py").write_text(
        "from utils import *\n\ndef batch(n):\n    return torch.zeros(n).cuda()\n")
    proc = cli(str(tmp_path / "train.py"), "--select", "PTL101", "--output-format", "concise",
               "--no-cache")
    assert proc.returncode == 1 and "train.py:4:12: PTL101" in proc.stdout, proc.stdout


MARIMO = '''\
import marimo

app = marimo.App()


@app.cell
def _():
    import torch as T
    from torch import nn
    return T, nn


@app.cell(hide_code=True)
def _(T, nn):
    a = T.zeros(3)
    b = nn.Linear(2, 2)
    def helper(T):
        return T.zeros(1)
    return a, b


def plain(T):
    return T.zeros(2)
'''


def test_a_marimo_cell_gets_the_modules_other_cells_import_as_parameters():
    # the cells' parameters; a nested function's and a plain function's are theirs
    assert _resolve_all(MARIMO, "T.zeros") == ["torch.zeros", None, None]
    assert _resolve_all(MARIMO, "nn.Linear") == ["torch.nn.Linear"]
    # without `import marimo` the same functions are plain functions
    assert _resolve_all(MARIMO.replace("import marimo\n", ""), "T.zeros") == [None, None, None]


SNAPSHOT = """\
def _(torch, model, loader, optimizer):
    best = None
    for x in loader:
        model(x).sum().backward()
        optimizer.step()
        best = model.state_dict()
    torch.save(best, "best.pt")
"""


def test_a_fix_that_adds_an_import_is_not_offered_in_a_marimo_notebook():
    """PTL002's fix needs `import copy`, which a cell would not see: the finding
    stays, without a fix (so no summary counts it as fixable)."""
    from ptlint.engine.lint import lint_text
    from conftest import settings_for

    notebook = ("import marimo\n\napp = marimo.App()\n\n\n@app.cell\ndef _():\n"
                "    import torch\n    return (torch,)\n\n\n@app.cell\n" + SNAPSHOT)
    (found,) = lint_text(notebook, "nb.py", settings_for("PTL002")).findings
    assert found.code == "PTL002" and found.fix is None
    script = "import torch\n\n\n" + SNAPSHOT.replace("def _(torch, ", "def train(")
    (plain,) = lint_text(script, "plain.py", settings_for("PTL002")).findings
    assert plain.fix is not None and plain.fix.imports == ("import copy",)


def test_a_top_level_rebinding_replaces_an_import_but_none_does_not():
    # `import model` then `model = model.RNNModel()`: the name holds the instance
    clash = "import model\nmodel = model.RNNModel()\nmodel.eval()\n"
    assert _resolve_all(clash, "model.eval") == [None]
    # an optional dependency: the import stays what the name means
    optional = ("try:\n    import apex.amp as amp\nexcept ImportError:\n    amp = None\n"
                "amp.initialize()\n")
    assert _resolve_all(optional, "amp.initialize") == ["apex.amp.initialize"]
    # a fallback class defined where the import failed, the same
    fallback = ("try:\n    import apex.amp as amp\nexcept ImportError:\n"
                "    class amp:\n        pass\namp.initialize()\n")
    assert _resolve_all(fallback, "amp.initialize") == ["apex.amp.initialize"]


def test_a_name_bound_to_two_things_in_one_scope_is_not_an_alias():
    # which binding a use sees depends on a branch the resolver cannot follow
    source = """
import contextlib
import torch

def either(amp):
    ctx = contextlib
    if amp:
        ctx = torch.cuda.amp
    return ctx.autocast

def local(amp):
    def null(): ...
    run = null
    if amp:
        run = torch.cuda.amp
    return run.autocast

def same(half):
    F = torch.nn.functional
    F = torch.nn.functional
    dtype = torch.float32
    if half:  # two members of one module: the same kind of thing
        dtype = torch.float16
    return F.relu, dtype.itemsize
"""
    assert _resolve_all(source, "ctx.autocast") == [None]
    assert _resolve_all(source, "run.autocast") == [None]
    assert _resolve_all(source, "F.relu") == ["torch.nn.functional.relu"]
    assert _resolve_all(source, "dtype.itemsize") == ["torch.float16.itemsize"]
