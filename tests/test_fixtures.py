"""Every rule against its fixture folder: bad.py fires exactly where marked,
fixing it gives fixed.py, and good.py stays silent."""
from __future__ import annotations

import pytest

from conftest import expectations, fixture_dirs, settings_for
from ptlint.engine.fix import MAX_FIX_PASSES, fix_text
from ptlint.engine.lint import lint_text

DIRS = fixture_dirs()


def _code(folder) -> str:
    return folder.name.split("_", 1)[0]


@pytest.mark.parametrize("folder", DIRS, ids=lambda p: p.name)
def test_bad_fires_exactly_where_marked(folder):
    bad = folder / "bad.py"
    text = bad.read_text(encoding="utf-8")
    code = _code(folder)
    result = lint_text(text, str(bad), settings_for(code))
    assert not result.errors
    found = {(f.span.start.line, f.code) for f in result.findings}
    expected = {e for e in expectations(text) if e[1] == code}
    assert expected, "bad.py marks no line with `# expect:`"
    assert found == expected


@pytest.mark.parametrize("folder", DIRS, ids=lambda p: p.name)
def test_fix_gives_fixed_and_converges(folder):
    """fixed.py is what the rule's fix makes of bad.py; for a suggestion (a fix
    never applied on its own), what it makes once the user opts in to it."""
    code = _code(folder)
    bad = (folder / "bad.py").read_text(encoding="utf-8")
    fixed_path = folder / "fixed.py"
    settings = settings_for(code, extend_unsafe_fixes=[code])
    result = fix_text(bad, "bad.py", settings, unsafe=True)
    assert not [e for e in result.result.errors if "converge" in e]
    if not fixed_path.exists():
        assert result.text == bad, "the rule fixes something but has no fixed.py"
        return
    assert result.text == fixed_path.read_text(encoding="utf-8")
    compile(result.text, "fixed.py", "exec")
    # re-linting leaves only findings that have no fix
    again = lint_text(result.text, "fixed.py", settings)
    assert [f for f in again.findings if f.fix is not None] == []
    # and fixing again changes nothing
    assert fix_text(result.text, "fixed.py", settings, unsafe=True).text == result.text


@pytest.mark.parametrize("folder", DIRS, ids=lambda p: p.name)
def test_good_is_silent(folder):
    good = folder / "good.py"
    assert good.exists(), "every rule needs near misses in good.py"
    text = good.read_text(encoding="utf-8")
    result = lint_text(text, str(good), settings_for(_code(folder)))
    assert not result.errors
    assert [(f.span.start.line, f.code) for f in result.findings] == []


@pytest.mark.parametrize("folder", DIRS, ids=lambda p: p.name)
def test_fixture_files_compile(folder):
    for name in ("bad.py", "fixed.py", "good.py"):
        path = folder / name
        if path.exists():
            compile(path.read_text(encoding="utf-8"), str(path), "exec")


def test_ptl031_only_where_the_code_names_torch():
    # micrograd's `Value.data` in a training loop: no torch parameter, in a file that
    # never names torch (a comment does not count)
    micrograd = ("# a tiny autograd engine, like torch's\n"
                 "def train(model, loss):\n"
                 "    for p in model.parameters():\n"
                 "        p.data -= 0.1 * p.grad\n")
    assert lint_text(micrograd, "mg.py", settings_for("PTL031")).findings == []
    with_torch = "import torch\n" + micrograd
    assert [f.code for f in lint_text(with_torch, "t.py", settings_for("PTL031")).findings] == [
        "PTL031"]


def test_ptl031_weight_of_another_framework():
    # a Paddle file (`paddle.nn.Linear`'s weight) is not torch's; a file that names
    # no framework at all (an init helper of a torch project) still counts
    init = ("def init(self, dim):\n"
            "    self.linear = nn.Linear(dim, dim)\n"
            "    self.linear.weight.data.fill_(1.0)\n")
    paddle = "import paddle\nfrom paddle import nn\n" + init
    assert lint_text(paddle, "p.py", settings_for("PTL031")).findings == []
    for text in (init, "import torch\nimport paddle\n" + init):
        assert [f.code for f in lint_text(text, "t.py", settings_for("PTL031")).findings] == [
            "PTL031"]
