"""Rules whose findings depend on the target torch version (`torch-version`)."""
from __future__ import annotations

import textwrap

from packaging.version import Version

from conftest import settings_for
from ptlint.engine.fix import fix_text
from ptlint.engine.lint import lint_text


def _lint(code: str, source: str, version: str):
    settings = settings_for(code, torch_version=Version(version))
    return settings, lint_text(textwrap.dedent(source), "t.py", settings).findings


LOAD = """
import torch

def restore(path, kwargs):
    a = torch.load(path)
    b = torch.load(path, weights_only=False)
    c = torch.load(path, **kwargs)
    try:
        d = torch.load(path, weights_only=True)
    except TypeError:
        d = torch.load(path)
    return a, b, c, d
"""


def test_torch_load_before_2_6_flags_a_missing_weights_only_and_fixes_it():
    settings, findings = _lint("PTL301", LOAD, "2.5")
    assert [(f.span.start.line, f.fix is not None) for f in findings] == [(5, True), (6, False)]
    fixed = fix_text(textwrap.dedent(LOAD), "t.py", settings, unsafe=True).text
    assert "a = torch.load(path, weights_only=True)" in fixed
    assert "c = torch.load(path, **kwargs)" in fixed
    assert "        d = torch.load(path)\n" in fixed


def test_torch_load_inside_a_call_given_weights_only_has_no_fix():
    # the keyword sits on the wrong call: the author chose `False`, and the fix would
    # write `True` into `torch.load`
    source = """
    import torch
    def restore(net, path):
        net.load_state_dict(torch.load(path)["weights"], weights_only=False)
        net.load_state_dict(torch.load(path))
    """
    _, findings = _lint("PTL301", source, "2.5")
    assert [(f.span.start.line, f.fix is not None) for f in findings] == [(4, False), (5, True)]


def test_torch_load_from_2_6_flags_only_explicit_false():
    _, findings = _lint("PTL301", LOAD, "2.6")
    assert [f.span.start.line for f in findings] == [6]


def test_torch_load_is_silent_in_tests_not_in_evaluation_scripts_named_test():
    settings = settings_for("PTL301", torch_version=Version("2.5"))
    source = textwrap.dedent(LOAD)

    def lines(path: str, text: str = source) -> list[int]:
        return [f.span.start.line for f in lint_text(text, path, settings).findings]

    assert lines("tests/test_io.py") == []  # a test folder
    assert lines("test_io.py", "import pytest\n" + source) == []  # a framework
    assert lines("test_disp.py") == [5, 6]  # an evaluation script: loads what it is given
    assert lines("eval.py", source.replace("def restore", "def test_restore")) == [5, 6]


def test_torch_load_rule_off_before_1_13():
    _, findings = _lint("PTL301", LOAD, "1.12")
    assert findings == []


REMOVED = """
import torch
from torch._six import inf

x = torch.solve(b, A)
q = torch.qr(a)
"""


def test_removed_api_depends_on_the_target_version():
    _, removed = _lint("PTL201", REMOVED, "2.1")
    _, deprecated = _lint("PTL202", REMOVED, "2.1")
    assert [f.span.start.line for f in removed] == [3, 5]
    assert [f.span.start.line for f in deprecated] == [6]
    # before 1.13 torch.solve still exists: deprecated, not removed
    _, removed = _lint("PTL201", REMOVED, "1.12")
    _, deprecated = _lint("PTL202", REMOVED, "1.12")
    assert removed == []
    assert [f.span.start.line for f in deprecated] == [3, 5, 6]
    assert "removed in torch 1.13" in deprecated[1].message


def test_deprecated_api_not_yet_deprecated_for_older_targets():
    source = "import torch.nn as nn\nm = nn.utils.weight_norm(nn.Linear(2, 2))\n"
    assert _lint("PTL202", source, "2.0")[1] == []
    assert len(_lint("PTL202", source, "2.1")[1]) == 1


CHECKPOINT = """
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

def run(block, x, functions):
    return checkpoint(block, x), checkpoint_sequential(functions, 2, x)
"""


def test_checkpoint_message_names_the_warning_only_where_the_target_warns():
    warns = "and a warning is raised"
    # `checkpoint` warns from 2.1, `checkpoint_sequential` (given the argument in 2.0) from 2.2
    for version, lines, warned in (("1.13", [5], []), ("2.0", [5, 5], []),
                                   ("2.1", [5, 5], [True, False]),
                                   ("2.2", [5, 5], [True, True])):
        found = _lint("PTL011", CHECKPOINT, version)[1]
        assert [f.span.start.line for f in found] == lines, version
        assert [warns in f.message for f in found] == (warned or [False] * len(lines)), version


def test_torch_six_members_removed_in_1_9():
    # `container_abcs` and `int_classes` left `torch._six` in 1.9, the module in 2.0
    source = "from torch._six import container_abcs, int_classes, string_classes\n"
    messages = {version: [f.message for code in ("PTL201", "PTL202")
                          for f in _lint(code, source, version)[1]]
                for version in ("1.8", "1.9", "2.0")}
    assert [m.split(";")[0] for m in messages["1.8"]] == [
        "`torch._six.container_abcs` is deprecated and removed in torch 1.9"]
    assert [m.split(";")[0] for m in messages["1.9"]] == [
        "`torch._six.container_abcs` was removed in torch 1.9",
        "`torch._six` is deprecated and removed in torch 2.0"]
    assert [m.split(";")[0] for m in messages["2.0"]] == [
        "`torch._six.container_abcs` was removed in torch 1.9"]
