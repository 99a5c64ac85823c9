"""What the engine guarantees of every rule's fix, through the command line: a safe
fix keeps comments; an import a fix adds is what its new code finds; code written
into an f-string, and the fixed file, stay valid for Python 3.10; a keyword added
after a commented argument leaves the comment where it was; PTL230 is not safe
where the default device is changed."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import run_cli

PLUGIN = Path(__file__).resolve().parent / "robust_plugin"  # test-only rules (PTL980)


def _lint(tmp_path: Path, text: str, *args: str, name: str = "a.py"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    proc = run_cli(name, "--no-cache", "--output-format", "json", *args, cwd=tmp_path)
    return json.loads(proc.stdout)


def _fix(tmp_path: Path, text: str, *args: str, name: str = "a.py", env=None):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    proc = run_cli(name, "--no-cache", "--fix", *args, cwd=tmp_path, env=env)
    return proc, path.read_text(encoding="utf-8")


# -- comments ----------------------------------------------------------------------------------
COMMENTED = """\
import torch

b = (torch.zeros(2)  # keep me
     .cuda())
c = torch.ones(3).cuda(  # and me
    0)
d = torch.ones(3).cuda()  # after the call: kept by the fix
"""


def test_a_fix_that_would_drop_a_comment_is_not_safe(tmp_path):
    found = {f["line"]: f["fix"]["applicability"] for f in _lint(tmp_path, COMMENTED)}
    assert found == {3: "unsafe", 5: "unsafe", 7: "safe"}
    proc, text = _fix(tmp_path, COMMENTED)
    assert proc.returncode == 1, proc.stderr
    assert text == COMMENTED.replace('d = torch.ones(3).cuda()', 'd = torch.ones(3, device="cuda")')
    assert "2 more fixable with `--fix --unsafe-fixes`." in proc.stdout


def test_a_keyword_added_after_a_commented_argument_leaves_the_comment_there(tmp_path):
    before = """\
from torch.utils.data import DataLoader


def train(ds, model):
    loader = DataLoader(
        ds,
        batch_size=4,
        shuffle=False  # keep order
    )
    other = DataLoader(ds, batch_size=4,
                       shuffle=True,  # random
                       )
    for x in loader:
        model(x.cuda())
    for x in other:
        model(x.cuda())
"""
    proc, text = _fix(tmp_path, before, "--select", "PTL132", "--unsafe-fixes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert text == before.replace(
        "        shuffle=False  # keep order\n",
        "        shuffle=False,  # keep order\n        pin_memory=True\n",
    ).replace(
        "                       shuffle=True,  # random\n",
        "                       shuffle=True,  # random\n                       pin_memory=True,\n",
    )


# -- Python 3.10 -------------------------------------------------------------------------------
def test_code_written_into_an_fstring_uses_quotes_python_310_accepts(tmp_path):
    before = ('import torch\n\ns = f"{torch.ones(1).cuda()}"\n'
              "t = f'{torch.ones(1).cuda()}'\n"
              'u = f"""{torch.ones(1).cuda()}"""\n')
    proc, text = _fix(tmp_path, before)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert text == ('import torch\n\ns = f"{torch.ones(1, device=\'cuda\')}"\n'
                    "t = f'{torch.ones(1, device=\"cuda\")}'\n"
                    'u = f"""{torch.ones(1, device=\'cuda\')}"""\n')
    # in blocks, and in a compound statement's header
    before = ('import torch\n\ndef f(x):\n    if x:\n        print(f"{torch.ones(1).cuda()}")\n'
              "    for c in f'{torch.ones(2).cuda()}':\n        y = f'{x}'\n    return y\n")
    proc, text = _fix(tmp_path, before)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert text == before.replace('f"{torch.ones(1).cuda()}"', 'f"{torch.ones(1, device=\'cuda\')}"'
                                  ).replace("f'{torch.ones(2).cuda()}'",
                                            "f'{torch.ones(2, device=\"cuda\")}'")
    # inside f-strings of both quotes no string literal fits before 3.12: no fix offered
    nested = "import torch\n\nv = f\"{f'{torch.ones(1).cuda()}'}\"\n"
    [finding] = _lint(tmp_path, nested)
    assert finding["code"] == "PTL101" and finding["fix"] is None


def _plugin_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGIN), env.get("PYTHONPATH")]))
    env["PTLINT_TEST_RULES"] = "1"
    return env


NEEDS_GROUP = "try:\n    pass\nexcept NeedsGroup:\n    pass\n"


def test_a_fix_whose_result_needs_a_newer_python_than_310_is_not_applied(tmp_path):
    """PTL980 (a test rule) rewrites the handler into `except*`, which Python 3.10
    cannot parse, although the interpreter running ptlint may."""
    proc, text = _fix(tmp_path, NEEDS_GROUP, "--select", "PTL980", env=_plugin_env())
    assert text == NEEDS_GROUP
    assert proc.returncode == 2
    assert "error: a.py:1: fix for PTL980 would break the file; not applied" in proc.stderr
    # a file that already needs a newer Python may get such a fix
    newer = "try:\n    pass\nexcept* OSError:\n    pass\n\n" + NEEDS_GROUP
    proc, text = _fix(tmp_path, newer, "--select", "PTL980", env=_plugin_env())
    assert proc.returncode == 0, proc.stderr
    assert text.endswith("except* NeedsGroup:\n    pass\n")


# -- imports a fix adds -------------------------------------------------------------------------
TAKEN = {
    "a local assigned later": """\
import torch


def f(x):
    y = torch._six.inf
    math = x
    return y, math
""",
    "a module-level function defined later": """\
import torch

y = torch._six.inf


def math():
    pass
""",
    "a class attribute": """\
import torch


class Limits:
    math = 1
    top = torch._six.inf
""",
    "a loop variable": """\
from torch import FloatTensor


def f():
    x = FloatTensor([1, 2])
    for torch in range(3):
        pass
    return x
""",
    "a comprehension variable": """\
from torch import FloatTensor

rows = [FloatTensor([1, 2]) for torch in range(3)]
""",
}


@pytest.mark.parametrize("case", TAKEN)
def test_no_fix_when_the_import_it_needs_would_not_be_what_its_code_finds(tmp_path, case):
    [finding] = _lint(tmp_path, TAKEN[case], "--torch-version", "2.4")
    assert finding["code"] in ("PTL201", "PTL230") and finding["fix"] is None
    proc, text = _fix(tmp_path, TAKEN[case], "--torch-version", "2.4", "--unsafe-fixes")
    assert text == TAKEN[case] and proc.returncode == 1


def test_the_import_is_added_where_the_name_is_free(tmp_path):
    before = """\
import torch


class Limits:
    math = 1

    def top(self):
        return torch._six.inf  # the class attribute is not visible here
"""
    proc, text = _fix(tmp_path, before, "--torch-version", "2.4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert text == "import torch\nimport math\n" + before.replace("torch._six.inf", "math.inf")[
        len("import torch\n"):]


# -- PTL230 and the default device ----------------------------------------------------------------
def test_legacy_constructor_fix_is_unsafe_where_the_default_device_changes(tmp_path):
    default = """\
import torch

torch.set_default_device("cuda")
a = torch.Tensor([1.0, 2.0])
b = torch.cuda.FloatTensor(2, 3)
"""
    found = {f["line"]: f["fix"]["applicability"] for f in _lint(tmp_path, default)}
    assert found == {4: "unsafe", 5: "safe"}  # an explicit device="cuda" keeps its device
    # the older spelling: a CUDA default tensor type moves the default device too
    older = default.replace('torch.set_default_device("cuda")',
                            'torch.set_default_tensor_type("torch.cuda.FloatTensor")')
    found = {f["line"]: f["fix"]["applicability"] for f in _lint(tmp_path, older)
             if f["code"] == "PTL230"}
    assert found == {4: "unsafe", 5: "safe"}
    context = """\
import torch


def build():
    return torch.FloatTensor(2, 3)


with torch.device("meta"):
    x = build()
"""
    proc, text = _fix(tmp_path, context)
    assert text == context and proc.returncode == 1
    assert "1 more fixable with `--fix --unsafe-fixes`." in proc.stdout
    plain = context.replace('with torch.device("meta"):\n    x = build()', "x = build()")
    proc, text = _fix(tmp_path, plain)
    assert proc.returncode == 0 and "torch.empty(2, 3, dtype=torch.float32)" in text


def test_a_notebook_cell_gets_the_same_quotes(tmp_path):
    cell = 'import torch\ns = f"{torch.ones(1).cuda()}"\n'
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": cell}]}
    proc, text = _fix(tmp_path, json.dumps(notebook), name="nb.ipynb")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(text)["cells"][0]["source"] == cell.replace(
        "torch.ones(1).cuda()", "torch.ones(1, device='cuda')")


@pytest.mark.parametrize("code, fits", [
    ('f"{x}" f\'{d["k"]}\' f"""{d["k"]}"""', True),
    ('f"{d["k"]}"', False),  # the f-string's own quote: Python 3.12 and newer only
    ("f'{d['k']}'", False),
    ('f"{a!r:>{width}}"', True),
    ('f"{x:{d["w"]}}"', False),  # in a nested field too
    ('f"{x:#x}"', True),  # `#` in a format spec is not a comment
    ("f\"{'#'}\"", False),
    ('f"{chr(92)}" f"{\'\\\\n\'}"', False),  # a backslash in a field
    ('f"""{x\n}"""', True),
])
def test_fstrings_as_python_before_312_reads_them(code, fits):
    """The f-string rules `fits_oldest_python` applies where the interpreter running
    ptlint is 3.12 or newer (then its own parser accepts PEP 701 f-strings)."""
    import libcst as cst

    from ptlint.engine.guard import _fstrings_before_312

    assert _fstrings_before_312(cst.parse_module(code + "\n")) is fits


# -- a fix keeps a script able to read its own files ---------------------------------------------
SAVES_AND_LOADS = """\
import torch
import torch.nn as nn


def train():
    model = nn.Linear(2, 2)
    torch.save(model, "model.pt")


def resume():
    model = torch.load("model.pt"{weights_only})
    return model
"""


def test_ptl331_offers_no_fix_where_the_file_loads_whole_objects_back(tmp_path):
    loads_module = SAVES_AND_LOADS.format(weights_only="")
    found = _lint(tmp_path, loads_module, "--select", "PTL331")
    assert [(f["line"], f["fix"]) for f in found] == [(7, None)]
    proc, text = _fix(tmp_path, loads_module, "--select", "PTL331", "--unsafe-fixes")
    assert proc.returncode == 1 and text == loads_module
    # a loader that only reads tensors gets the state dict it can read
    loads_tensors = SAVES_AND_LOADS.format(weights_only=", weights_only=True")
    proc, text = _fix(tmp_path, loads_tensors, "--select", "PTL331", "--unsafe-fixes")
    assert proc.returncode == 0, proc.stdout
    assert "torch.save(model.state_dict(), " in text


def test_a_suggestion_is_shown_and_applied_only_when_the_user_opts_in(tmp_path):
    """PTL122's `bias=False` would make checkpoints saved before unreadable: a
    suggestion, never applied by --fix --unsafe-fixes, unless the configuration
    lists the rule in extend-unsafe-fixes."""
    text = ("import torch.nn as nn\n\n"
            "block = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))\n")
    (tmp_path / "a.py").write_text(text)
    args = ("a.py", "--no-cache", "--select", "PTL122")
    shown = run_cli(*args, cwd=tmp_path)
    assert "help (suggestion): Pass `bias=False`" in shown.stdout
    run_cli(*args, "--fix", "--unsafe-fixes", cwd=tmp_path)
    assert (tmp_path / "a.py").read_text() == text
    (tmp_path / "pyproject.toml").write_text('[tool.ptlint]\nextend-unsafe-fixes = ["PTL122"]\n')
    run_cli(*args, "--fix", cwd=tmp_path)
    assert (tmp_path / "a.py").read_text() == text  # still an unsafe fix: --unsafe-fixes too
    run_cli(*args, "--fix", "--unsafe-fixes", cwd=tmp_path)
    assert (tmp_path / "a.py").read_text() == text.replace("nn.Conv2d(3, 8, 3)",
                                                           "nn.Conv2d(3, 8, 3, bias=False)")


def test_an_import_already_made_below_other_statements_is_not_added_again(tmp_path):
    before = """\
import sys
sys.path.append("core")

import torch
from torch import FloatTensor

x = FloatTensor([1.0, 2.0])
"""
    proc, text = _fix(tmp_path, before)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert text.count("import torch\n") == 1 and "x = torch.tensor(" in text, text
    assert text.startswith('import sys\nsys.path.append("core")\n\nimport torch\n'), text
    # where it is missing, it is still added, once
    missing = ('import sys\nsys.path.append("core")\n\nfrom torch import FloatTensor\n\n'
               "x = FloatTensor([1.0, 2.0])\n")
    proc, text = _fix(tmp_path, missing)
    assert text.count("import torch\n") == 1 and "torch.tensor(" in text, text
    # an import below a line the fix makes use it does not count: that line runs first
    late = "from torch import FloatTensor\nx = FloatTensor([1.0, 2.0])\nimport torch\n"
    proc, text = _fix(tmp_path, late, "--torch-version", "2.4")
    assert text.index("import torch\n") < text.index("x = torch.tensor("), text


def test_a_torch_import_goes_below_the_settings_a_script_makes_before_importing_torch(tmp_path):
    """Libraries read some settings when torch is loaded (`OMP_NUM_THREADS`) or
    starts CUDA (`CUDA_VISIBLE_DEVICES`): a torch import the fix needs goes after
    the file's own first torch import, not above the code that runs before it."""
    before = """\
\"\"\"Train.\"\"\"
import os

os.environ["OMP_NUM_THREADS"] = "4"
os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"

import torch.nn as nn


def train(net, loader, opt):
    model = nn.DataParallel(net).cuda()
    for x, y in loader:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
"""
    proc, text = _fix(tmp_path, before, "--select", "PTL102", "--unsafe-fixes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "DistributedDataParallel(net.cuda())" in text, text
    settings = text.index('os.environ["CUDA_VISIBLE_DEVICES"]')
    own = text.index("import torch.nn as nn\n")
    for added in ("import torch\n", "from torch.nn.parallel import DistributedDataParallel\n"):
        assert text.count(added) == 1 and text.index(added) > own > settings, text
    # with nothing but imports above it, the imports join the file's import block
    plain = before.replace('os.environ["OMP_NUM_THREADS"] = "4"\n', "").replace(
        'os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"\n', "")
    proc, text = _fix(tmp_path, plain, "--select", "PTL102", "--unsafe-fixes")
    assert ("import os\n\n\nimport torch.nn as nn\nimport torch\n"
            "from torch.nn.parallel import DistributedDataParallel\n") in text, text


REWRAPS = """\
from torch.autograd import Variable


def step(model, loader, h):
    for x, y in loader:
        # the batch
        x = Variable(x)
        out = model(x)
        y = Variable(y)  # labels
        x, y = Variable(x, volatile=True), Variable(y)
        a, b = Variable(x), Variable(y.cuda())
        b, x = b, Variable(x)
    if h is not None:
        h = Variable(h)
    return out, y, h, a, b
"""


def test_ptl231_removes_a_statement_its_fix_would_leave_as_x_equals_x(tmp_path):
    proc, text = _fix(tmp_path, REWRAPS, "--select", "PTL231", "--unsafe-fixes")
    assert proc.returncode == 0, proc.stdout
    assert "        # the batch\n        out = model(x)\n" in text  # its comment stays
    # kept where removing it would lose the comment after it, or empty its block
    assert "        y = y  # labels\n" in text
    assert "        h = h\n" in text
    # the tuple form: gone when every element stays itself, else kept with the calls unwrapped
    assert "x, y =" not in text and "        a, b = x, y.cuda()\n" in text, text
    assert "b, x =" not in text, text


OLD_IMPORT = """\
import torch
from torch.nn.utils import clip_grad_norm


def step(model):
    clip_grad_norm(model.parameters(), 1.0)
"""


@pytest.mark.parametrize("name, extra, removed", [
    ("train.py", "", True),
    ("__init__.py", "", False),  # a package may re-export it
    ("train.py", '__all__ = ["clip_grad_norm"]\n', False),  # exported by name
    ("train.py", "# see clip_grad_norm\n", False),  # a comment names it: the user decides
])
def test_ptl202_an_import_its_fixed_calls_no_longer_use_is_removed(tmp_path, name, extra,
                                                                   removed):
    proc, text = _fix(tmp_path, OLD_IMPORT + extra, "--select", "PTL202", name=name)
    assert "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)" in text
    assert ("from torch.nn.utils import clip_grad_norm\n" not in text) == removed, text
    compile(text, name, "exec")
    assert proc.returncode == (0 if removed else 1), proc.stdout
