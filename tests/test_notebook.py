"""Jupyter notebooks: IPython syntax, positions per cell, cross-cell names, fixes
that keep every byte outside the changed cells' sources, and the CLI end to end."""
from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

import conftest
from conftest import EXPECT, FIXTURES, ROOT, settings_for
from ptlint.engine import notebook
from ptlint.engine.job import Job
from ptlint.engine.cells import Layout
from ptlint.io import ipython, notebook as nbfile
from ptlint.io.ipython import mask, unmask
from ptlint.io.notebook import Notebook
from ptlint.model import Position
from ptlint.rule import registry

NOTEBOOKS = FIXTURES / "notebooks"
CROSS_CELL = NOTEBOOKS / "cross_cell"
# PTL102's fix, which these tests use as a fix that adds an import
GUARD = "torch.distributed.is_available() and torch.distributed.is_initialized()"


def ddp_fix(module: str, original: str) -> str:
    return f"DistributedDataParallel({module}) if {GUARD} else {original}"


# PTL102 offers no fix in notebooks (a kernel cannot be launched with torchrun), nor
# for a model not yet on its device. The notebook machinery is tested with its fix
# all the same, wherever the call can be rebuilt: in this process through the fixture
# below, in `ptlint` subprocesses through tests/robust_plugin.
@pytest.fixture(autouse=True)
def ptl102_fixes_notebooks(monkeypatch):
    from ptlint.rules import ptl102_data_parallel

    monkeypatch.setattr(ptl102_data_parallel.DataParallel, "_fixable",
                        lambda self, wrap: wrap.rebuildable)


def run_cli(*args: str, env: dict | None = None, **kwargs):
    return conftest.run_cli(*args, env=conftest.ptl102_fixes_notebooks_env(env), **kwargs)


# One cross-cell notebook per mission rule: names defined in one cell, the mistake in
# another. A rule's notebook is tested as soon as the rule is in the registry.
MISSION_RULES = ("PTL001", "PTL002", "PTL003", "PTL004", "PTL005", "PTL101", "PTL102")
CROSS_CELL_NOTEBOOKS = {p.name.split("_", 1)[0]: p for p in sorted(CROSS_CELL.glob("PTL*.ipynb"))}
ENABLED_CROSS_CELL = [p for code, p in CROSS_CELL_NOTEBOOKS.items() if code in registry()]

# Notebooks with `# expect:` marks, linted with every rule they mention.
MARKED = sorted(p for p in NOTEBOOKS.glob("*.ipynb"))
NB_FILES = [*MARKED, *CROSS_CELL_NOTEBOOKS.values()]


def load(path: Path) -> dict:
    return json.loads(path.read_bytes().decode("utf-8"))


def sources(path: Path) -> dict[int, str]:
    return {i: nbfile.source_text(c["source"]) for i, c in enumerate(load(path)["cells"])}


def expected(path: Path) -> set[tuple[int, int, str]]:
    """(cell, line, code) for every `# expect: CODE` in a code cell."""
    out = set()
    for index, cell in enumerate(load(path)["cells"]):
        if cell["cell_type"] != "code":
            continue
        for number, line in enumerate(nbfile.source_text(cell["source"]).splitlines(), 1):
            match = EXPECT.search(line)
            if match:
                out |= {(index, number, c.strip()) for c in match.group("codes").split(",")}
    return out


def codes_in(path: Path) -> list[str]:
    return sorted({c for _, _, c in expected(path)} - {"PTL000"}) or ["PTL102"]


def process(path: Path, *codes: str, mode: str = "check", unsafe: bool = True, data=None):
    job = Job(settings_for(*(codes or codes_in(path))), mode, unsafe=unsafe, cache=False)
    return notebook.process(path, path.read_bytes() if data is None else data, job, write=False)


def outside_sources(text: str) -> tuple[str, list[str]]:
    """The notebook's text with every cell's `source` value cut out, and those values."""
    spans = nbfile._source_spans(text)
    out, values, last = [], [], 0
    for index in sorted(spans):
        start, end = spans[index]
        out.append(text[last:start])
        values.append(text[start:end])
        last = end
    out.append(text[last:])
    return "\0".join(out), values


# -- masking IPython syntax ----------------------------------------------------------
MASKED = [
    ("%matplotlib inline\nx = 1", "pass  # ptlint-magic:0\nx = 1"),
    ("!pip install torch\n", "pass  # ptlint-magic:0\n"),
    ("! nvidia-smi", "pass  # ptlint-magic:0"),
    ("files = !ls\na, b = %sx echo 1 2", "pass  # ptlint-magic:0\npass  # ptlint-magic:1"),
    ("model?\nmodel??\n?model\ntorch.nn.Linear?  # help", "\n".join(
        f"pass  # ptlint-magic:{i}" for i in range(4))),
    ("/print a b\n,f a\n;f a b", "\n".join(f"pass  # ptlint-magic:{i}" for i in range(3))),
    ("!pip install \\\n    torch \\\n    numpy\nx = 1",
     "pass  # ptlint-magic:0\npass  # ptlint-magic:1\npass  # ptlint-magic:2\nx = 1"),
    ("for i in x:\n    %time f(i)\n    !echo $i", "for i in x:\n    pass  # ptlint-magic:0\n"
                                                 "    pass  # ptlint-magic:1"),
    ("%%time\ny = f(x)", "pass  # ptlint-magic:0\ny = f(x)"),
    ("\n%%timeit -n 10\ny = f(x)", "\npass  # ptlint-magic:0\ny = f(x)"),
    # line magics without their `%` (IPython's automagic): not Python, so IPython
    ("cd InstColorization/\npip install -r requirements.txt\nx = 1",
     "pass  # ptlint-magic:0\npass  # ptlint-magic:1\nx = 1"),
    ("load_ext autoreload\nautoreload 2", "pass  # ptlint-magic:0\npass  # ptlint-magic:1"),
    # not IPython: a `%` or `!` that continues a Python line, strings, comments
    ("y = (a\n     % b)", None),
    ("y = a \\\n    % b", None),
    ('s = """\n%d items\n!not shell\nwhat?\n"""', None),
    ("s = '''a\n!b'''\nx = 1  # really?", None),
    ("d = {1:\n  !=2}", None),
    ("x != y\nx = y if a else b", None),
    ("print('why?')\nf(x) % 2", None),
    # a magic's name used as Python: Python
    ("time = 3\ncd(path)\nls\nenv = dict(a=1)\ntime.sleep(1)\nconfig = {\n    'a': 1,\n}",
     None),
]


@pytest.mark.parametrize(("source", "masked"), MASKED, ids=lambda v: repr(v)[:30])
def test_mask(source, masked):
    result = mask(source)
    assert result is not None
    assert result.text == (source if masked is None else masked)
    assert unmask(result.text, result) == source


@pytest.mark.parametrize("magic", ["bash", "writefile x.py", "html", "sh", "R", "javascript"])
def test_non_python_cell_magics_are_skipped(magic):
    assert mask(f"%%{magic}\nimport torch\n") is None


@pytest.mark.parametrize("magic", ["time", "timeit", "capture", "prun", "python3"])
def test_python_cell_magics_keep_their_body(magic):
    result = mask(f"%%{magic}\nimport torch\n")
    assert result is not None and result.text.endswith("\nimport torch\n")


def test_leading_indentation_is_removed_like_ipython():
    result = mask("  x = f(\n      1)\n  y = 2\n")
    assert result.text == "x = f(\n    1)\ny = 2\n"
    assert result.shift(Position(1, 4)) == Position(1, 6)
    assert unmask(result.text, result) == "  x = f(\n      1)\n  y = 2\n"


PIECES = st.sampled_from([
    "x = 1", "%matplotlib inline", "!pip install a", "files = !ls", "model?", "for i in y:",
    "    %time f(i)", "    z = (i", "         % 2)", "s = '''", "!inside string", "'''",
    "!cmd \\", "  continued", "", "# comment?", "%%time", "y = a if b else c  # ok?",
    "\tq = 1", "print('?')", "x = 1\r", "z = f(\\", "  2)",
])


@given(st.lists(PIECES, max_size=12), st.sampled_from(["\n", "\r\n"]), st.booleans())
@hsettings(max_examples=300, deadline=None)
def test_unmask_restores_any_cell_exactly(pieces, newline, trailing):
    source = newline.join(pieces) + (newline if trailing and pieces else "")
    result = mask(source)
    if result is None:
        return
    assert len(ipython.lines_of(result.text)) == len(ipython.lines_of(source))
    assert unmask(result.text, result) == source
    assert ipython._mask(source, 0) == result  # the shortcut for plain cells agrees


# -- the notebook file ---------------------------------------------------------------
def test_source_spans_find_every_source_value():
    for path in NB_FILES:
        text = path.read_text(encoding="utf-8")
        spans = nbfile._source_spans(text)
        cells = json.loads(text)["cells"]
        assert sorted(spans) == list(range(len(cells)))
        for index, (start, end) in spans.items():
            assert json.loads(text[start:end]) == cells[index]["source"]


@pytest.mark.parametrize("path", NB_FILES, ids=lambda p: p.name)
def test_rewriting_with_the_same_sources_gives_the_same_bytes(path):
    """The round trip the writer relies on: nothing changed, nothing moves."""
    raw = path.read_bytes()
    nb = Notebook.parse(raw)
    same = {i: nbfile.source_text(c["source"]) for i, c in enumerate(nb.cells)}
    assert nb.encode(nb.with_sources(same)) == raw
    assert nb.encode(nb.with_sources({})) == raw


@pytest.mark.parametrize("path", NB_FILES, ids=lambda p: p.name)
def test_splicing_and_redumping_agree(path):
    """Where json.dumps reproduces the file, the splicing fallback writes the same bytes."""
    nb = Notebook.parse(path.read_bytes())
    style = nb._style()
    if style is None:
        assert path.name == "odd_layout.ipynb"
        return
    for index, source in nb.code_cells():
        for new in (source + "\nx = 1", "", "é = 1\n", "a\nb"):
            data = json.loads(nb.text)
            data["cells"][index]["source"] = nbfile.source_value(new, data["cells"][index]["source"])
            assert nb._splice({index: new}) == nbfile._dump(data, style)


def test_layouts_json_dumps_reproduces_are_redumped_others_spliced():
    assert Notebook.parse((NOTEBOOKS / "magics.ipynb").read_bytes())._style() is not None
    assert Notebook.parse((NOTEBOOKS / "compact.ipynb").read_bytes())._style() is not None
    assert Notebook.parse((NOTEBOOKS / "crlf.ipynb").read_bytes())._style().newline == "\r\n"
    ascii_style = Notebook.parse((NOTEBOOKS / "ascii_escaped.ipynb").read_bytes())._style()
    assert ascii_style.ensure_ascii and ascii_style.indent == 2 and ascii_style.tail == ""
    assert Notebook.parse((NOTEBOOKS / "odd_layout.ipynb").read_bytes())._style() is None


def test_layout_maps_module_positions_to_cells():
    layout = Layout(["a = 1\nb = 2\n", "", "c = 3\n"])
    assert layout.locate(Position(2, 4)) == (0, Position(2, 4))
    assert layout.locate(Position(3, 0)) == (2, Position(1, 0))
    assert layout.locate(Position(3, 0), end=True) == (0, Position(3, 0))


# -- findings and positions ------------------------------------------------------------
@pytest.mark.parametrize("path", MARKED, ids=lambda p: p.name)
def test_findings_are_where_marked(path):
    out = process(path)
    assert not out.errors
    assert {(f.cell, f.span.start.line, f.code) for f in out.findings} == expected(path)


def test_positions_point_into_the_cell():
    out = process(NOTEBOOKS / "magics.ipynb")
    cells = sources(NOTEBOOKS / "magics.ipynb")
    for f in out.findings:
        if f.code != "PTL102":
            continue
        line = cells[f.cell].splitlines()[f.span.start.line - 1]
        assert line[f.span.start.column:].startswith("nn.DataParallel(")
        assert f.fix is None or all(
            cells[f.cell].splitlines()[e.start.line - 1][e.start.column:].startswith("nn.Data")
            for e in f.fix.edits
        )


def test_cells_that_are_not_python_or_do_not_parse():
    out = process(NOTEBOOKS / "magics.ipynb")
    by_cell = {f.cell: f for f in out.findings}
    assert 7 not in by_cell and 8 not in by_cell  # %%bash, %%writefile
    assert by_cell[11].code == "PTL000"  # the broken cell; the ones after it are linted
    assert 12 in by_cell
    assert 0 not in by_cell and 14 not in by_cell  # markdown and raw cells


def test_a_non_python_notebook_is_skipped():
    out = process(NOTEBOOKS / "not_python.ipynb", "PTL102")
    assert out.findings == [] and out.errors == []


# -- fixing --------------------------------------------------------------------------------
FIXABLE = [*(p for p in MARKED if p.name not in ("clean.ipynb", "not_python.ipynb")),
           *ENABLED_CROSS_CELL]


@pytest.mark.parametrize("path", FIXABLE, ids=lambda p: p.name)
def test_fix_rewrites_only_the_changed_cells_sources(path):
    before = path.read_bytes().decode("utf-8")
    out = process(path, mode="fix")
    assert not out.errors
    if out.new_text is None:
        return
    after = out.new_text
    frame_before, values_before = outside_sources(before)
    frame_after, values_after = outside_sources(after)
    assert frame_after == frame_before  # outputs, metadata, counts, key order, indentation, tail
    old_cells, new_cells = load(path)["cells"], json.loads(after)["cells"]
    for index, (old, new, old_value, new_value) in enumerate(
            zip(old_cells, new_cells, values_before, values_after)):
        if nbfile.source_text(old["source"]) == nbfile.source_text(new["source"]):
            assert new_value == old_value, f"cell {index} unchanged but rewritten"
        else:
            assert old["cell_type"] == "code"
            assert type(old["source"]) is type(new["source"])
    # the fix converges: fixing the result changes nothing, and no fixable finding is left
    again = process(path, mode="fix", data=after.encode())
    assert again.new_text is None
    assert not [f for f in again.findings if f.fix is not None]


def test_fixed_magics_notebook():
    path = NOTEBOOKS / "magics.ipynb"
    out = process(path, mode="fix")
    old, new = sources(path), {
        i: nbfile.source_text(c["source"]) for i, c in enumerate(json.loads(out.new_text)["cells"])
    }
    changed = {i for i in old if old[i] != new[i]}
    assert changed == {1, 4, 6, 9, 12}
    # the import goes to the imports cell, after the magics and the imports
    assert new[1] == old[1] + "\nfrom torch.nn.parallel import DistributedDataParallel"
    assert new[4].endswith(
        f"model = {ddp_fix('model', 'nn.DataParallel(model)')}  # expect: PTL102")
    assert new[6].startswith("%%time\n")
    # the masked lines and the strings around them are untouched
    assert new[9].replace(ddp_fix("net", "nn.DataParallel(net)"), "nn.DataParallel(net)") == old[9]
    assert isinstance(json.loads(out.new_text)["cells"][12]["source"], str)
    # the dedented cell is reported but its multi-line call is not rewritten
    assert new[10] == old[10]
    remaining = {(f.cell, f.code) for f in out.findings}
    assert remaining == {(10, "PTL102"), (11, "PTL000")}


def test_fixes_in_the_reported_positions_of_the_fixed_notebook():
    path = NOTEBOOKS / "odd_layout.ipynb"
    out = process(path, mode="fix")
    assert out.findings == []
    assert out.cells[1].startswith("import torch\nfrom torch.nn.parallel import DistributedDataParallel\n")


def test_an_import_made_only_in_a_later_cell_is_added_before_use():
    nb = {"cells": [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["%matplotlib inline\n", "import torch\n", "m = torch.nn.DataParallel(net)"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["import torch\n", "from torch.nn.parallel import DistributedDataParallel"]},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    data = json.dumps(nb, indent=1).encode()
    out = process(Path("x.ipynb"), "PTL102", mode="fix", data=data)
    cells = json.loads(out.new_text)["cells"]
    assert cells[0]["source"] == [
        "%matplotlib inline\n", "import torch\n",
        "from torch.nn.parallel import DistributedDataParallel\n", "\n",
        f"m = {ddp_fix('net', 'torch.nn.DataParallel(net)')}",
    ]
    assert cells[1]["source"] == nb["cells"][1]["source"]


# -- cross-cell: names flow from cell to cell ---------------------------------------------
def test_every_mission_rule_has_a_cross_cell_notebook():
    assert set(CROSS_CELL_NOTEBOOKS) == set(MISSION_RULES)


@pytest.mark.parametrize("path", ENABLED_CROSS_CELL, ids=lambda p: p.stem)
def test_cross_cell(path):
    code = path.name.split("_", 1)[0]
    out = process(path, code)
    assert not out.errors
    assert {(f.cell, f.span.start.line, f.code) for f in out.findings} == expected(path)
    fixed = process(path, code, mode="fix")
    assert not fixed.errors
    assert not [f for f in fixed.findings if f.fix is not None]


# -- end to end ----------------------------------------------------------------------------
@pytest.fixture
def work(tmp_path):
    for path in MARKED:
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


def test_cli_check_names_the_cell(work):
    proc = run_cli("check", "magics.ipynb", "--no-cache", "--output-format", "concise", cwd=work)
    assert proc.returncode == 1, proc.stderr
    assert "magics.ipynb:cell 5:2:9: PTL102" in proc.stdout  # the fifth cell, as ruff says
    assert "magics.ipynb:cell 11:2:11: PTL102" in proc.stdout
    assert "magics.ipynb:cell 12:1:12: PTL000" in proc.stdout

    proc = run_cli("check", "magics.ipynb", "--no-cache", "--output-format", "json", cwd=work)
    found = json.loads(proc.stdout)
    first = next(f for f in found if f["cell"] == 5)  # the cell's number, as in the text
    assert (first["line"], first["column"], first["end_line"], first["end_column"]) == (2, 9, 2, 31)
    assert first["fix"]["edits"][0]["location"] == {"line": 2, "column": 9}
    assert all("cell" in f for f in found)

    proc = run_cli("check", "magics.ipynb", "--no-cache", cwd=work, env={**os.environ, "NO_COLOR": "1"})
    assert "magics.ipynb:cell 5:2:9: PTL102" in proc.stdout
    assert "2 | model = nn.DataParallel(model)  # expect: PTL102" in proc.stdout  # the cell's line


def test_cli_diff_shows_cells_and_changes_nothing(work):
    before = (work / "magics.ipynb").read_bytes()
    proc = run_cli("check", "magics.ipynb", "--no-cache", "--diff", "--unsafe-fixes", cwd=work)
    assert proc.returncode == 1, proc.stderr
    assert "--- a/magics.ipynb:cell 5\n+++ b/magics.ipynb:cell 5\n" in proc.stdout
    assert "-model = nn.DataParallel(model)  # expect: PTL102\n" in proc.stdout
    assert "Would fix 4 findings in 1 file." in proc.stderr
    assert (work / "magics.ipynb").read_bytes() == before


def test_cli_fix_writes_the_notebook(work):
    proc = run_cli("check", "magics.ipynb", "--no-cache", "--fix", "--unsafe-fixes",
                   "--output-format", "concise", cwd=work)
    assert proc.returncode == 1, proc.stderr  # two findings remain (no fix / syntax error)
    assert "Fixed 4 findings, 2 remaining." in proc.stdout
    expected_text = process(NOTEBOOKS / "magics.ipynb", mode="fix").new_text
    assert (work / "magics.ipynb").read_bytes().decode("utf-8") == expected_text
    proc = run_cli("check", "magics.ipynb", "--no-cache", "--output-format", "concise", cwd=work)
    assert proc.stdout.count("PTL") == 2


def test_cli_fix_with_nothing_to_fix_keeps_every_byte(work):
    for name in ("clean.ipynb", "not_python.ipynb"):
        before = (work / name).read_bytes()
        proc = run_cli("check", name, "--no-cache", "--fix", "--unsafe-fixes", cwd=work)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert (work / name).read_bytes() == before
    # a notebook whose only findings cannot be fixed (safe fixes only: PTL102 is unsafe)
    before = (work / "odd_layout.ipynb").read_bytes()
    proc = run_cli("check", "odd_layout.ipynb", "--no-cache", "--fix", cwd=work)
    assert proc.returncode == 1
    assert (work / "odd_layout.ipynb").read_bytes() == before


def test_cli_stdin_notebook():
    data = (NOTEBOOKS / "compact.ipynb").read_bytes()
    proc = run_cli("check", "-", "--stdin-filename", "nb/x.ipynb", "--output-format", "concise",
                   stdin=data)
    assert proc.returncode == 1
    assert "nb/x.ipynb:cell 1:2:5: PTL102" in proc.stdout
    proc = run_cli("check", "-", "--stdin-filename", "x.ipynb", "--fix", "--unsafe-fixes",
                   stdin=data)
    fixed = json.loads(proc.stdout)
    assert "DistributedDataParallel(x)" in "".join(fixed["cells"][0]["source"])
    proc = run_cli("check", "-", "--stdin-filename", "x.ipynb", "--fix", stdin=data)
    assert proc.stdout.encode() == data  # nothing safe to fix: echoed as it came


INVALID = {
    "not_json.ipynb": ('{"cells": [\n', "not JSON"),
    "nbformat3.ipynb": ('{"nbformat": 3, "worksheets": []}', "nbformat 3 is not supported"),
    "no_cells.ipynb": ('{"nbformat": 4, "metadata": {}}', "no `cells` list"),
    "bad_source.ipynb": ('{"nbformat": 4, "cells": [{"cell_type": "code", "source": 1}]}',
                         "cell 1: `source`"),
    "latin1.ipynb": (b'{"nbformat": 4, "cells": [], "x": "\xe9"}', "not UTF-8"),
    "list.ipynb": ("[1, 2]", "not a JSON object"),
}


def test_cli_invalid_notebooks_are_errors_and_the_run_goes_on(tmp_path):
    for name, (content, _) in INVALID.items():
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    shutil.copy(NOTEBOOKS / "compact.ipynb", tmp_path)
    proc = run_cli("check", ".", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    assert proc.returncode == 2
    for name, (_, why) in INVALID.items():
        assert f"error: {name}: invalid notebook: " in proc.stderr, proc.stderr
        line = next(line for line in proc.stderr.splitlines() if f"{name}:" in line)
        assert why in line
    assert "compact.ipynb:cell 1:2:5: PTL102" in proc.stdout


def test_cli_config_applies_to_notebooks(work):
    (work / "pyproject.toml").write_text(
        '[tool.ptlint]\nper-file-ignores = {"magics.ipynb" = ["PTL102"]}\n', encoding="utf-8")
    proc = run_cli("check", ".", "--no-cache", "--output-format", "concise", cwd=work)
    assert "magics.ipynb:cell 5" not in proc.stdout
    assert "magics.ipynb:cell 12:1:12: PTL000" in proc.stdout
    assert "compact.ipynb:cell 1:2:5: PTL102" in proc.stdout
    proc = run_cli("check", ".", "--no-cache", "--extend-exclude", "*.ipynb", cwd=work)
    assert proc.returncode == 0 and ".ipynb" not in proc.stdout


def test_cli_cache_gives_the_same_answer(work):
    first = run_cli("check", "magics.ipynb", "--output-format", "json", cwd=work)
    assert (work / ".ptlint_cache").is_dir()
    second = run_cli("check", "magics.ipynb", "--output-format", "json", cwd=work)
    assert json.loads(first.stdout) == json.loads(second.stdout)
    third = run_cli("check", "magics.ipynb", cwd=work, env={**os.environ, "NO_COLOR": "1"})
    assert "2 | model = nn.DataParallel(model)" in third.stdout  # quoted from a cached run


def test_read_only_notebook_is_not_written(tmp_path, monkeypatch):
    import ptlint.io.text

    path = tmp_path / "compact.ipynb"
    shutil.copy(NOTEBOOKS / "compact.ipynb", path)
    before = path.read_bytes()
    real = os.access
    monkeypatch.setattr(ptlint.io.text.os, "access",
                        lambda p, mode: False if Path(p) == path and mode == os.W_OK else real(p, mode))
    job = Job(settings_for("PTL102"), "fix", unsafe=True, cache=False)
    out = notebook.process(path, before, job)
    assert out.errors == [f"{path}: file is read-only; 1 fix(es) not written"]
    assert out.fixed == 0
    assert path.read_bytes() == before


def test_fix_writes_atomically_and_keeps_the_bom(tmp_path):
    path = tmp_path / "bom.ipynb"
    data = b"\xef\xbb\xbf" + (NOTEBOOKS / "compact.ipynb").read_bytes()
    path.write_bytes(data)
    path.chmod(0o640)
    job = Job(settings_for("PTL102"), "fix", unsafe=True, cache=False)
    out = notebook.process(path, data, job)
    assert not out.errors and out.fixed == 1
    written = path.read_bytes()
    assert written.startswith(b"\xef\xbb\xbf{")
    assert "DistributedDataParallel(x)" in written.decode("utf-8-sig")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["bom.ipynb"]


def test_pre_commit_hooks_cover_notebooks():
    import yaml

    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"ptlint", "ptlint-fix"}
    assert "--fix" in hooks["ptlint-fix"]["entry"].split()
    for hook in hooks.values():
        assert {"python", "jupyter"} <= set(hook["types_or"])
        assert hook["language"] == "python"


# -- fixes that move statements, cross cells or touch magics (rules made up for the test) -----
class _Rewrite:
    """Settings whose only rule is `rule`, fixable."""

    def __init__(self, rule):
        self.settings = settings_for("PTL102")
        self.settings.__dict__["rule_codes"] = (rule.code,)
        self.settings.__dict__["enabled_codes"] = frozenset({rule.code})
        self.settings.rules_to_run = lambda codes, text: [rule]  # type: ignore[method-assign]
        self.settings.fix_allowed = lambda code, safety, unsafe: True  # type: ignore[method-assign]

    def run(self, cells: list[str], mode: str = "fix"):
        nb = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {},
                         "outputs": [], "source": c} for c in cells],
              "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        data = (json.dumps(nb, indent=1) + "\n").encode()
        out = notebook.process(Path("t.ipynb"), data, Job(self.settings, mode, cache=False),
                               write=False)
        new = None if out.new_text is None else [
            c["source"] for c in json.loads(out.new_text)["cells"]]
        return out, new


def _rule(code: str, visit):
    from ptlint.model import Safety
    from ptlint.rule import Rule

    def method(name, fn):
        def call(self, node):
            return fn(self, node)

        call.__name__ = name  # LibCST finds visitor methods by their __name__
        return call

    return type("Made" + code, (Rule,), {
        "__doc__": "x", "code": code, "message": "made up", "fix_title": "fix",
        "fix_safety": Safety.SAFE, "__module__": __name__,
        **{name: method(name, fn) for name, fn in visit.items()}})


def _hoist(self, node):
    """Module level: move every `step()` statement to the end of the module."""
    import libcst as cst

    if not isinstance(node, cst.Module):
        return
    steps = [s for s in node.body if "step()" in cst.Module([]).code_for_node(s)]
    if steps:
        rest = [s for s in node.body if s not in steps]
        self.report(steps[0], edits=[(node, node.with_changes(body=[*rest, *steps]))])


def _mod_body(self, node):
    """Module level: rewrite the whole body, changing one statement's text."""
    import libcst as cst

    if not isinstance(node, cst.Module):
        return
    old = [s for s in node.body if cst.Module([]).code_for_node(s).startswith("y = 1")]
    if old:
        body = [cst.parse_statement("y = 2\n") if s is old[0] else s for s in node.body]
        self.report(old[0], edits=[(node, node.with_changes(body=body))])


def _drop_first(self, node):
    """Delete the first statement of the module (a magic's placeholder, here)."""
    import libcst as cst

    if isinstance(node, cst.Module) and node.body:
        self.report(node.body[0], edits=[(node.body[0], None)])


def test_a_module_wide_rewrite_is_narrowed_to_the_cell_it_changes():
    fake = _Rewrite(_rule("PTL901", {"visit_Module": _mod_body}))
    out, new = fake.run(["%matplotlib inline\nx = 1", "y = 1\nz = 3  # keep", "!ls\nw = 4"])
    assert not out.errors
    assert new == ["%matplotlib inline\nx = 1", "y = 2\nz = 3  # keep", "!ls\nw = 4"]
    check, _ = fake.run(["x = 1", "y = 1"], mode="check")
    (finding,) = check.findings
    assert (finding.cell, finding.fix.edits[0].start, finding.fix.edits[0].content) == (
        1, Position(1, 0), "y = 2\n")


def test_a_fix_that_moves_code_across_cells_is_not_applied():
    fake = _Rewrite(_rule("PTL902", {"visit_Module": _hoist}))
    out, new = fake.run(["opt.step()\nx = 1", "y = 2"])
    assert new is None and out.fixed == 0
    assert [f.fix for f in out.findings] == [None]  # shown without a fix


def test_a_fix_must_not_drop_a_magic():
    fake = _Rewrite(_rule("PTL903", {"visit_Module": _drop_first}))
    out, new = fake.run(["%time x = 1\ny = 2"])
    assert new is None
    assert out.errors == ["t.ipynb:cell 1:1: fix for PTL903 would break the cell; not applied"]


def _inline(*cells, **meta) -> bytes:
    nb = {"cells": [c if isinstance(c, dict) else {
        "cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": c}
        for c in cells], "metadata": meta, "nbformat": 4, "nbformat_minor": 5}
    return (json.dumps(nb, indent=1) + "\n").encode()


def test_file_level_noqa_in_any_cell_skips_the_notebook():
    data = _inline("import torch\nm = torch.nn.DataParallel(x)", "# ptlint: noqa")
    assert process(Path("x.ipynb"), "PTL102", data=data).findings == []
    data = _inline("import torch\nm = torch.nn.DataParallel(x)", "# ptlint: noqa: PTL001")
    assert len(process(Path("x.ipynb"), "PTL102", data=data).findings) == 1


def test_cells_in_another_language_are_skipped():
    sql = {"cell_type": "code", "execution_count": None, "outputs": [], "source": "SELECT 1",
           "metadata": {"vscode": {"languageId": "sql"}}}
    data = _inline("import torch", sql, "m = torch.nn.DataParallel(x)")
    out = process(Path("x.ipynb"), "PTL102", data=data)
    assert [(f.cell, f.code) for f in out.findings] == [(2, "PTL102")]


def test_top_level_await_and_crlf_sources():
    data = _inline("import torch\r\n%time x = 1\r\nawait thing()\r\n",
                   "m = torch.nn.DataParallel(x)\r\n!ls\r\n")
    out = process(Path("x.ipynb"), "PTL102", data=data)
    assert [(f.cell, f.span.start.line, f.code) for f in out.findings] == [(1, 1, "PTL102")]
    fixed = process(Path("x.ipynb"), "PTL102", mode="fix", data=data)
    cells = [c["source"] for c in json.loads(fixed.new_text)["cells"]]
    assert cells[0] == "import torch\r\nfrom torch.nn.parallel import DistributedDataParallel\r\n" \
                      "\r\n%time x = 1\r\nawait thing()\r\n"
    assert cells[1] == f"m = {ddp_fix('x', 'torch.nn.DataParallel(x)')}\r\n!ls\r\n"


def test_a_notebook_without_code_cells():
    data = _inline({"cell_type": "markdown", "metadata": {}, "source": ["# nothing"]})
    for mode in ("check", "fix", "diff"):
        out = process(Path("x.ipynb"), "PTL102", mode=mode, data=data)
        assert out.findings == [] and out.errors == [] and out.new_text is None


MARIMO_NOTEBOOK = '''\
import marimo

app = marimo.App()


@app.cell
def _():
    import torch
    return (torch,)


@app.cell
def _(torch):
    x = torch.zeros(3).cuda()
    return (x,)


if __name__ == "__main__":
    app.run()
'''


def test_a_marimo_notebook_is_linted_and_fixed_in_its_cells(tmp_path):
    (tmp_path / "nb.py").write_text(MARIMO_NOTEBOOK, encoding="utf-8")
    found = run_cli("nb.py", "--no-cache", "--output-format", "concise", cwd=tmp_path)
    assert found.returncode == 1 and "nb.py:14:9: PTL101 " in found.stdout
    fixed = run_cli("nb.py", "--no-cache", "--fix", cwd=tmp_path)
    assert fixed.returncode == 0
    assert (tmp_path / "nb.py").read_text(encoding="utf-8") == MARIMO_NOTEBOOK.replace(
        "torch.zeros(3).cuda()", 'torch.zeros(3, device="cuda")')
