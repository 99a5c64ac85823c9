"""Suppression through the command line: `# noqa` with codes or rule names,
invalid directives, directives read from comments only, unused directives
(PTL090) and `--add-noqa`, on Python files and notebooks."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

MOVED = "import torch\n\nx = torch.zeros(3).cuda(){comment}\n"


def concise(cli, *args: str, cwd: Path):
    out = cli(*args, "--output-format", "concise", "--no-cache", cwd=cwd)
    lines = [l for l in out.stdout.splitlines() if re.match(r"^\S+:\d+:\d+: PTL\d{3} ", l)
             or re.match(r"^\S+:cell \d+:\d+:\d+: PTL\d{3} ", l)]
    return out, lines


@pytest.mark.parametrize("comment, silent", [
    ("  # noqa: PTL101", True),
    ("  # noqa: tensor-moved-after-creation", True),  # a rule name
    ("  # noqa: E501, tensor-moved-after-creation because it is a test", True),
    ("  # keep  # noqa: PTL101", True),  # a directive after another comment
    ("  # noqa: data-parallel", False),  # another rule's name suppresses nothing else
    ("  # noqa: PTL102", False),
    ("  # noqa: PTL1", False),  # a prefix is not a code here, as in ruff
])
def test_noqa_takes_codes_and_rule_names(cli, tmp_path, comment, silent):
    (tmp_path / "m.py").write_text(MOVED.format(comment=comment))
    out, lines = concise(cli, "m.py", cwd=tmp_path)
    assert out.returncode == (0 if silent else 1)
    assert (lines == []) == silent
    assert "warning" not in out.stderr


@pytest.mark.parametrize("comment", ["  # noqa: not-a-rule", "  # noqa:", "  # noqa: tensor-moved"])
def test_an_invalid_directive_is_warned_and_suppresses_nothing(cli, tmp_path, comment):
    (tmp_path / "m.py").write_text(MOVED.format(comment=comment))
    out, lines = concise(cli, "m.py", cwd=tmp_path)
    assert out.returncode == 1
    assert [l.split(": ")[1].split()[0] for l in lines] == ["PTL101"]
    assert re.search(r"^warning: m\.py:3:28: invalid `# noqa` directive: .*suppresses nothing$",
                     out.stderr, re.M), out.stderr
    # the warning comes back on every run: such a file is not answered from the cache
    again = cli("m.py", "--output-format", "concise", cwd=tmp_path)
    cli("m.py", cwd=tmp_path)
    assert "invalid `# noqa` directive" in cli("m.py", cwd=tmp_path).stderr
    assert "invalid `# noqa` directive" in again.stderr
    assert "invalid" not in cli("m.py", "-q", cwd=tmp_path).stderr


def test_suppressions_are_comments_not_text(cli, tmp_path):
    """`# noqa` and `# ptlint: noqa` inside strings and docstrings are text."""
    (tmp_path / "m.py").write_text(
        'import torch\n'
        '\n'
        'def f():\n'
        '    """Docs.\n'
        '# ptlint: noqa\n'
        '    """\n'
        '    return torch.zeros(3).cuda()\n'
        '\n'
        's = "# noqa"; y = torch.ones(2).cuda()\n'
        "t = '''\n"
        '# noqa: PTL101\n'
        "'''; z = torch.ones(2).cuda()\n")
    out, lines = concise(cli, "m.py", cwd=tmp_path)
    assert [l.split(":")[1] for l in lines] == ["7", "9", "12"]
    # the same directives as comments do suppress
    (tmp_path / "n.py").write_text("# ptlint: noqa\nimport torch\nx = torch.zeros(3).cuda()\n")
    assert concise(cli, "n.py", cwd=tmp_path)[1] == []
    (tmp_path / "n.py").write_text("import torch\n# ptlint: noqa: tensor-moved-after-creation\n"
                                   "x = torch.zeros(3).cuda()\n")
    assert concise(cli, "n.py", cwd=tmp_path)[1] == []
    # a file-level directive must be a comment of its own line
    (tmp_path / "n.py").write_text("import torch\nx = torch.zeros(3).cuda()  # ptlint: noqa\n")
    assert len(concise(cli, "n.py", cwd=tmp_path)[1]) == 1


def test_a_finding_in_a_multiline_string_takes_the_directive_of_its_last_line(cli, tmp_path):
    (tmp_path / "m.py").write_text(
        'import torch\n\nx = torch.load("""\nckpt""", map_location=torch.zeros(1).cuda())'
        '  # noqa: PTL101\n')
    assert concise(cli, "m.py", cwd=tmp_path)[1] == []


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_directives_are_found_whatever_the_line_endings(cli, tmp_path, newline):
    text = newline.join(["import torch", "x = torch.zeros(3).cuda()  # noqa: PTL101",
                         "y = torch.zeros(3).cuda()", ""])
    (tmp_path / "m.py").write_bytes(text.encode())
    out, lines = concise(cli, "m.py", "--extend-select", "PTL090", cwd=tmp_path)
    assert [l.split(": ")[0] for l in lines] == ["m.py:3:5"]


# -- unused-noqa (PTL090) -------------------------------------------------------------
UNUSED = """\
import torch

a = torch.zeros(3).cuda()  # noqa: PTL101
b = torch.zeros(3, device="cuda")  # noqa: PTL101
c = torch.zeros(3, device="cuda")  # noqa: PTL101, E501
d = torch.zeros(3, device="cuda")  # noqa: PTL113, PTL999
e = torch.zeros(3, device="cuda")  # noqa: tensor-moved-after-creation the reason
f = torch.zeros(3, device="cuda")  # noqa
"""


def test_ignore_noqa_disregards_every_directive(cli, tmp_path):
    (tmp_path / "m.py").write_text(MOVED.format(comment="  # noqa: PTL101")
                                   + "y = torch.ones(2).cuda()  # noqa\n")
    (tmp_path / "f.py").write_text("# ptlint: noqa\n" + MOVED.format(comment=""))
    assert cli("m.py", "f.py", cwd=tmp_path).returncode == 0  # fills the cache
    out = cli("m.py", "f.py", "--ignore-noqa", "--extend-select", "PTL090",
              "--output-format", "concise", cwd=tmp_path)  # the cache must not answer
    assert out.returncode == 1
    assert sorted(l.split(": ")[0] for l in out.stdout.splitlines() if "PTL" in l) == [
        "f.py:4:5", "m.py:3:5", "m.py:4:5"]  # and no unused-noqa finding
    assert "warning" not in out.stderr

def test_unused_noqa_is_off_by_default(cli, tmp_path):
    (tmp_path / "m.py").write_text(UNUSED)
    out, lines = concise(cli, "m.py", cwd=tmp_path)
    assert out.returncode == 0 and lines == []


def test_unused_noqa_reports_what_suppressed_nothing(cli, tmp_path):
    (tmp_path / "m.py").write_text(UNUSED)
    out, lines = concise(cli, "m.py", "--extend-select", "unused-noqa", cwd=tmp_path)
    assert lines == [
        "m.py:4:36: PTL090 Unused `noqa` directive (unused: `PTL101`)",
        "m.py:5:36: PTL090 Unused `noqa` directive (unused: `PTL101`)",
        "m.py:6:36: PTL090 Unused `noqa` directive (non-enabled: `PTL113`; unknown: `PTL999`)",
        "m.py:7:36: PTL090 Unused `noqa` directive (unused: `tensor-moved-after-creation`)",
    ]
    stats = json.loads(cli("m.py", "--extend-select", "PTL090", "--statistics",
                           "--output-format", "json", "--no-cache", cwd=tmp_path).stdout)
    assert stats == [{"code": "PTL090", "name": "unused-noqa", "count": 4, "fixable": True,
                      "fixable_count": 4}]


def test_unused_noqa_fix_removes_the_codes_and_keeps_comments(cli, tmp_path):
    (tmp_path / "m.py").write_text(UNUSED)
    out = cli("m.py", "--extend-select", "PTL090", "--fix", "--no-cache", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "m.py").read_text() == """\
import torch

a = torch.zeros(3).cuda()  # noqa: PTL101
b = torch.zeros(3, device="cuda")
c = torch.zeros(3, device="cuda")  # noqa: E501
d = torch.zeros(3, device="cuda")
e = torch.zeros(3, device="cuda")  # the reason
f = torch.zeros(3, device="cuda")  # noqa
"""


# -- --add-noqa ---------------------------------------------------------------------------
LEGACY = """\
import torch

a = torch.zeros(3).cuda()
b = torch.zeros(3).cuda()  # keep this comment
c = torch.zeros(3).cuda()  # noqa: E501 the reason
d = torch.load(\"\"\"
ckpt.pt\"\"\", map_location=torch.zeros(1).cuda())
e = 1 + \\
    torch.zeros(2).cuda().sum()
s = "# noqa"; f = torch.zeros(3).cuda()
"""
ADDED = """\
import torch

a = torch.zeros(3).cuda()  # noqa: PTL101
b = torch.zeros(3).cuda()  # keep this comment  # noqa: PTL101
c = torch.zeros(3).cuda()  # noqa: E501, PTL101 the reason
d = torch.load(\"\"\"
ckpt.pt\"\"\", map_location=torch.zeros(1).cuda())  # noqa: PTL101, PTL301
e = 1 + \\
    torch.zeros(2).cuda().sum()  # noqa: PTL101
s = "# noqa"; f = torch.zeros(3).cuda()  # noqa: PTL101
"""


def test_add_noqa_silences_every_finding_and_keeps_comments(cli, tmp_path):
    (tmp_path / "legacy.py").write_text(LEGACY)
    (tmp_path / "clean.py").write_text("import torch\n")
    out = cli(".", "--add-noqa", "--torch-version", "2.4", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip() == "Added 6 noqa directives."
    assert (tmp_path / "legacy.py").read_text() == ADDED
    assert (tmp_path / "clean.py").read_text() == "import torch\n"
    check = cli(".", "--torch-version", "2.4", "--extend-select", "PTL090", cwd=tmp_path)
    assert check.returncode == 0 and "All checks passed!" in check.stdout
    # idempotent: nothing left to add, nothing said
    again = cli(".", "--add-noqa", "--torch-version", "2.4", cwd=tmp_path)
    assert again.returncode == 0 and again.stderr == ""
    assert (tmp_path / "legacy.py").read_text() == ADDED
    # new code is still gated
    with (tmp_path / "legacy.py").open("a") as handle:
        handle.write("g = torch.ones(1).cuda()\n")
    assert cli(".", "--torch-version", "2.4", cwd=tmp_path).returncode == 1


def test_add_noqa_leaves_no_stale_cache(cli, tmp_path):
    """`--add-noqa` gives unused directives no `# noqa` (and findings it did cover
    are not `check`'s answer): a later check still reports them."""
    (tmp_path / "m.py").write_text(UNUSED)
    assert cli("m.py", "--add-noqa", "--extend-select", "PTL090", cwd=tmp_path).stderr == ""
    out = cli("m.py", "--extend-select", "PTL090", "--output-format", "concise", cwd=tmp_path)
    assert out.returncode == 1 and out.stdout.count("PTL090") == 4


def test_add_noqa_keeps_line_endings_and_refuses_what_it_cannot_do(cli, tmp_path):
    (tmp_path / "crlf.py").write_bytes(b"import torch\r\nx = torch.zeros(3).cuda()\r\n")
    assert cli("crlf.py", "--add-noqa", cwd=tmp_path).returncode == 0
    assert (tmp_path / "crlf.py").read_bytes() == (
        b"import torch\r\nx = torch.zeros(3).cuda()  # noqa: PTL101\r\n")
    (tmp_path / "broken.py").write_text("import torch\nx = torch.zeros(3).cuda(\n")
    out = cli("broken.py", "--add-noqa", cwd=tmp_path)
    assert out.returncode == 2 and "broken.py:2: no `# noqa` added" in out.stderr
    assert (tmp_path / "broken.py").read_text() == "import torch\nx = torch.zeros(3).cuda(\n"
    for flags in (["--fix"], ["--diff"]):
        bad = cli("crlf.py", "--add-noqa", *flags, cwd=tmp_path)
        assert bad.returncode == 2 and "cannot be combined" in bad.stderr
    stdin = cli("-", "--add-noqa", stdin="import torch\n", cwd=tmp_path)
    assert stdin.returncode == 2 and "standard input" in stdin.stderr


def _notebook(*sources: str) -> str:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["# Title"]}]
    cells += [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
               "source": source.splitlines(keepends=True)} for source in sources]
    return json.dumps({"cells": cells, "metadata": {"language_info": {"name": "python"}},
                       "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


def test_add_noqa_in_a_notebook(cli, tmp_path):
    nb = tmp_path / "nb.ipynb"
    nb.write_text(_notebook("import torch", "%matplotlib inline\nx = torch.zeros(3).cuda()\n"
                            "y = torch.ones(2).cuda()  # keep",
                            "s = '# noqa'; z = torch.zeros(1).cuda()"))
    out = cli("nb.ipynb", "--add-noqa", cwd=tmp_path)
    assert out.returncode == 0 and out.stderr.strip() == "Added 3 noqa directives."
    cells = ["".join(c["source"]) for c in json.loads(nb.read_text())["cells"]]
    assert cells == [
        "# Title", "import torch",
        "%matplotlib inline\nx = torch.zeros(3).cuda()  # noqa: PTL101\n"
        "y = torch.ones(2).cuda()  # keep  # noqa: PTL101",
        "s = '# noqa'; z = torch.zeros(1).cuda()  # noqa: PTL101",
    ]
    before = nb.read_bytes()
    again = cli("nb.ipynb", "--add-noqa", cwd=tmp_path)
    assert again.returncode == 0 and again.stderr == "" and nb.read_bytes() == before
    assert cli("nb.ipynb", "--extend-select", "PTL090", cwd=tmp_path).returncode == 0


def test_noqa_in_a_notebook_is_matched_per_cell_line(cli, tmp_path):
    (tmp_path / "nb.ipynb").write_text(_notebook(
        "import torch\nx = torch.zeros(3).cuda()  # noqa: tensor-moved-after-creation",
        "y = torch.zeros(3).cuda()  # noqa: nonsense\nz = 1  # noqa: PTL101"))
    out, lines = concise(cli, "nb.ipynb", "--extend-select", "PTL090", cwd=tmp_path)
    assert [l.split(": ")[1].split()[0] for l in lines] == ["PTL101", "PTL090"]
    cell = re.match(r"nb\.ipynb:(cell \d+):1:5: ", lines[0]).group(1)  # the third cell
    assert lines[1].startswith(f"nb.ipynb:{cell}:2:8: PTL090")
    assert f"warning: nb.ipynb:{cell}:1:28: invalid `# noqa` directive" in out.stderr
