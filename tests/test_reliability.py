"""No run may lose a byte, break working code, or answer for the wrong file (issue 13).

Each case goes through the command line as a user runs it; the hooks that
inject a concurrent edit or count operations come from tests/robust_plugin,
a sitecustomize put on PYTHONPATH for those subprocesses only.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import pool_padding, run_cli
from test_robustness import _env, ptlint

CUDA = "torch.zeros(2).cuda()"


# -- scale: --fix and noqa grow linearly with the findings of a file (item 20) ---------
def _counted(tmp_path: Path, name: str, text: str, *args: str) -> tuple[str, dict[str, int]]:
    path = tmp_path / name
    path.write_text(text)
    counts = tmp_path / f"{name}.counts.json"
    proc = ptlint(str(path), "-j", "1", "--select", "PTL101", "--output-format", "concise", *args,
                  env=_env(PTLINT_TEST_COUNT=str(counts)))
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout + proc.stderr, json.loads(counts.read_text())


LAYOUTS = {
    "one fix per line": lambda n: "import torch\n" + "".join(f"x{i} = {CUDA}\n" for i in range(n)),
    "all on one line": lambda n: "import torch\nx = [" + ", ".join([CUDA] * n) + "]\n",
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_fix_and_noqa_work_grows_linearly_with_the_findings(tmp_path, layout):
    """Four times the findings cost about four times the work (n log n at most),
    not sixteen: edits were checked against every edit taken before them, and
    the noqa filter read a finding's whole line once per finding."""
    work: dict[int, dict[str, int]] = {}
    for n in (300, 1200):
        text = LAYOUTS[layout](n)
        out, check = _counted(tmp_path, f"check{n}.py", text)
        assert f"Found {n} findings." in out
        out, fix = _counted(tmp_path, f"fix{n}.py", text, "--fix")
        assert f"Fixed {n} findings, 0 remaining." in out
        assert (tmp_path / f"fix{n}.py").read_text().count('device="cuda"') == n
        work[n] = {key: check[key] + fix[key] for key in check}
    for key in work[300]:
        assert work[1200][key] <= 6 * max(work[300][key], 1), (key, work)


# -- decoding (item 12) ---------------------------------------------------------------
def test_cr_only_file_with_a_coding_comment_is_decoded_as_python_does(tmp_path):
    """Classic Mac line endings: the tokenizer splits lines on \\r too, so the
    coding comment on the first line applies; the file is linted and fixed in
    its own encoding and line endings."""
    data = (b"# -*- coding: latin-1 -*-\rimport torch\rname = 'caf\xe9'\r"
            b"m = torch.nn.DataParallel(model.cuda())\r")
    path = tmp_path / "mac.py"
    path.write_bytes(data)
    proc = ptlint(str(path), "--select", "PTL000,PTL102", "--output-format", "concise")
    assert proc.stdout.splitlines()[0] == f"{path}:4:5: PTL102 `DataParallel` is slower than " \
        "`DistributedDataParallel`, even on one machine"
    assert "PTL000" not in proc.stdout
    proc = ptlint(str(path), "--select", "PTL102", "--fix", "--unsafe-fixes")
    assert "Fixed 1 finding, 0 remaining." in proc.stdout
    fixed = path.read_bytes()
    assert b"name = 'caf\xe9'\r" in fixed and b"\n" not in fixed
    assert b"DistributedDataParallel(model.cuda())" in fixed


def test_cr_only_file_that_is_not_utf8_is_located_on_its_line(tmp_path):
    (tmp_path / "mac.py").write_bytes(b"x = 1\ry = 2\rz = '\xff'\r")
    proc = ptlint(str(tmp_path / "mac.py"), "--output-format", "concise")
    assert proc.stdout.splitlines()[0] == (
        f"{tmp_path / 'mac.py'}:3:6: PTL000 SyntaxError: not valid utf-8: byte 0xff at line 3, "
        "column 6 (invalid start byte), and no PEP 263 coding comment declares another encoding")


# -- notebooks (items 2, 11, 14, 15) -------------------------------------------------------
BOM = b"\xef\xbb\xbf"


def notebook(*cells: str) -> str:
    return json.dumps({
        "nbformat": 4, "nbformat_minor": 5, "metadata": {},
        "cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [],
                   "execution_count": None} for c in cells],
    }, indent=1) + "\n"


def sources(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8-sig"))["cells"]]


def test_stdin_notebook_fix_keeps_the_bom():
    data = BOM + notebook(f"import torch\nx = {CUDA}\n").encode()
    proc = ptlint("-", "--stdin-filename", "x.ipynb", "--fix", stdin=data)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.encode()
    assert out.startswith(BOM) and not out.startswith(BOM * 2)
    assert json.loads(out[3:])["cells"][0]["source"] == 'import torch\nx = torch.zeros(2, device="cuda")\n'


@pytest.mark.parametrize("lookalike", ["pass  # ptlint-magic:0", "# ptlint-magic:0"])
def test_a_line_that_looks_like_a_magic_placeholder_stays_as_it_is(tmp_path, lookalike):
    cells = [f"%time x = 1\n{lookalike}\n",
             f"{lookalike}\nimport torch\n%time y = 2\nm = torch.nn.DataParallel(model)\n"]
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(*cells))
    before = path.read_bytes()
    proc = ptlint(str(path), "--select", "PTL000", "--fix")  # nothing to fix
    assert proc.returncode == 0 and path.read_bytes() == before, proc.stdout
    proc = ptlint(str(path), "--select", "PTL102", "--fix", "--unsafe-fixes",  # adds an import
                  env=NB_FIXES)
    assert "Fixed 1 finding, 0 remaining." in proc.stdout
    fixed = f"m = {DDP_FIX}\n"
    imported = "from torch.nn.parallel import DistributedDataParallel\n\n"
    if lookalike.startswith("pass"):  # a statement: the import goes above it
        second = f"{imported}{lookalike}\nimport torch\n%time y = 2\n{fixed}"
    else:  # a comment heading the cell: the import goes after `import torch`
        second = f"{lookalike}\nimport torch\n{imported}%time y = 2\n{fixed}"
    assert sources(path) == [cells[0], second]


DP = "import torch\nm = torch.nn.DataParallel(model)\n"
# PTL102 offers no fix in notebooks (nor for a model not yet on its device); the
# notebook tests use its fix all the same, through tests/robust_plugin
NB_FIXES = _env(PTLINT_TEST_NOTEBOOK_FIXES="1")
DDP_FIX = ("DistributedDataParallel(model) if torch.distributed.is_available() and "
           "torch.distributed.is_initialized() else torch.nn.DataParallel(model)")
NB_CONCISE = ("--select", "PTL000,PTL101,PTL102", "--output-format", "concise")


@pytest.mark.parametrize("bad, finding", [
    ("s = 'a\x00b'\n", "cell 2:1:7: PTL000 SyntaxError: source code cannot contain null bytes"),
    ("x = " + "(" * 1000 + "1" + ")" * 1000 + "\n",
     "cell 2:1:205: PTL000 SyntaxError: too many nested parentheses"),
    ("def f(:\n    pass\n", "cell 2:1:7: PTL000 SyntaxError: invalid syntax"),
])
def test_one_invalid_cell_hides_nothing_of_the_others(tmp_path, bad, finding):
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(DP, bad, f"x = {CUDA}\n"))
    proc = ptlint(str(path), *NB_CONCISE)
    assert [line for line in proc.stdout.splitlines() if line.startswith(str(path))] == [
        f"{path}:cell 1:2:5: PTL102 `DataParallel` is slower than `DistributedDataParallel`, "
        "even on one machine",
        f"{path}:{finding}",
        f"{path}:cell 3:1:5: PTL101 Tensor created on the CPU and then moved; pass `device=` to "
        "the factory instead"]
    proc = ptlint(str(path), "--select", "PTL101", "--fix")  # the other cells are still fixed
    assert "Fixed 1 finding, 1 remaining." in proc.stdout  # the PTL000
    assert sources(path)[1] == bad


def test_a_cell_nested_deeper_than_ptlint_parses_is_named_and_skipped(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(DP, "x = " + "-" * 600 + "1\n", f"x = {CUDA}\n"))
    proc = ptlint(str(path), *NB_CONCISE)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: {path}:cell 2:1: expression nested about 602 levels deep; ptlint parses at most "
        "500 levels; cell skipped"]
    assert f"{path}:cell 1:2:5: PTL102" in proc.stdout and f"{path}:cell 3:1:5: PTL101" in proc.stdout


def test_a_form_feed_in_one_cell_keeps_the_fixes_of_the_others(tmp_path):
    """LibCST drops a form feed before a statement: no fix on that line, the
    rest is fixed as usual, and the form feed is kept."""
    path = tmp_path / "nb.ipynb"
    cells = [DP, f"y = 1\n\x0cz = {CUDA}\n", f"x = {CUDA}\n"]
    path.write_text(notebook(*cells))
    proc = ptlint(str(path), "--select", "PTL101,PTL102", "--fix", "--unsafe-fixes",
                  "--output-format", "concise", env=NB_FIXES)
    assert "Fixed 2 findings, 1 remaining." in proc.stdout, proc.stdout
    assert re.search(rf"^{re.escape(str(path))}:cell 2:2:\d+: PTL101 ", proc.stdout, re.M)
    assert sources(path) == [
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel\n\n"
        f"m = {DDP_FIX}\n",
        cells[1], 'x = torch.zeros(2, device="cuda")\n']


def test_a_form_feed_before_a_statement_keeps_the_fixes_of_other_lines(tmp_path):
    path = tmp_path / "a.py"
    text = f"import torch\ny = 1\n\x0cz = {CUDA}\nx = {CUDA}\nm = torch.nn.DataParallel(model.cuda())\n"
    path.write_text(text)
    proc = ptlint(str(path), "--select", "PTL101,PTL102", "--fix", "--unsafe-fixes",
                  "--output-format", "concise")
    # the DataParallel fix adds an import, which LibCST would add by printing the
    # whole module, form feed lost: refused, and said so
    assert proc.stderr.splitlines() == [
        f"error: {path}:5: fix for PTL102 adds an import, and LibCST does not reproduce this "
        "file byte for byte (a form feed before a statement?); not applied"]
    assert "Fixed 1 finding, 2 remaining." in proc.stdout
    assert path.read_text() == text.replace(f"x = {CUDA}", 'x = torch.zeros(2, device="cuda")')


# -- --fix never overwrites what it did not read, and says what the file still has (2, 10) --
@pytest.mark.parametrize("name, text", [
    ("a.py", f"import torch\nx = {CUDA}  # ORIGINAL\n"),
    ("nb.ipynb", notebook(f"import torch\nx = {CUDA}  # ORIGINAL\n", "y = 1  # ORIGINAL\n")),
])
def test_a_file_edited_during_fix_is_not_overwritten(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    proc = ptlint(str(path), "--select", "PTL101", "--fix", "--output-format", "json",
                  env=_env(PTLINT_TEST_EDIT_BEFORE_WRITE="1"))
    assert path.read_text() == text.replace("ORIGINAL", "EDITED ELSEWHERE")  # nothing lost
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"error: {path}: changed while ptlint was fixing it; "
                                        "not written"]
    assert [f["code"] for f in json.loads(proc.stdout)] == ["PTL101"]  # it still has its finding
    assert [p.name for p in tmp_path.iterdir()] == [name]


@pytest.mark.parametrize("name, text", [
    ("a.py", f"import torch\nx = {CUDA}\n"),
    ("nb.ipynb", notebook(f"import torch\nx = {CUDA}\n")),
])
def test_a_fix_that_cannot_be_written_leaves_the_findings_shown(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o444)
    proc = ptlint(str(path), "--select", "PTL101", "--fix")
    assert proc.returncode == 2 and path.read_text() == text
    assert proc.stderr.splitlines() == [f"error: {path}: file is read-only; 1 fix(es) not written"]
    assert "Fixed 0 findings, 1 remaining." in proc.stdout
    assert "x = torch.zeros(2).cuda()" in proc.stdout  # quoted from the file as it is
    proc = ptlint(str(path), "--select", "PTL101", "--fix", "--output-format", "json")
    assert [(f["code"], f["fix"] is not None) for f in json.loads(proc.stdout)] == [("PTL101", True)]



# -- what --fix keeps of a file (item 22) ------------------------------------------------
FIXABLE = f"import torch\nx = {CUDA}\n"
FIXED = 'import torch\nx = torch.zeros(2, device="cuda")\n'


def test_fix_a_file_whose_long_multibyte_name_fills_the_name_limit(tmp_path):
    path = tmp_path / ("\N{GRINNING FACE}" * 60 + ".py")  # 243 bytes: the temporary name must be shorter
    path.write_text(FIXABLE)
    proc = ptlint(str(path), "--select", "PTL101", "--fix")
    assert proc.returncode == 0, proc.stderr
    assert path.read_text() == FIXED
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_fix_keeps_extended_attributes(tmp_path):
    path = tmp_path / "a.py"
    path.write_text(FIXABLE)
    try:
        os.setxattr(path, "user.ptlint-test", b"kept")
    except (AttributeError, OSError) as exc:
        pytest.skip(f"no user extended attributes here: {exc}")
    proc = ptlint(str(path), "--select", "PTL101", "--fix")
    assert proc.returncode == 0 and path.read_text() == FIXED
    assert os.getxattr(path, "user.ptlint-test") == b"kept"


def test_fix_of_a_hard_linked_file_replaces_only_the_name_given(tmp_path):
    """Documented: the fixed file gets its own inode; another name of the old file
    (a backup snapshot, a package cache) keeps the old content."""
    path, other = tmp_path / "a.py", tmp_path / "snapshot.py"
    path.write_text(FIXABLE)
    os.link(path, other)
    proc = ptlint(str(path), "--select", "PTL101", "--fix")
    assert proc.returncode == 0 and path.read_text() == FIXED
    assert other.read_text() == FIXABLE and os.stat(other).st_nlink == 1


# -- the cache folder is ptlint's own (items 1, 4, 22) -------------------------------------
@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "src" / "train.py").write_text(DP)
    (root / "notes.txt").write_text("mine\n")
    return root


def cached(project: Path, *args: str, cwd: Path | None = None, **env: str):
    """ptlint with its cache (the helper `ptlint` passes --no-cache)."""
    return run_cli(*args, cwd=cwd or project, env=_env(**env))


def files_of(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


@pytest.mark.parametrize("value", ["", ".", "..", "src/..", "{outside}", "src", "src/train.py",
                                   "src/"])
def test_a_cache_dir_that_is_not_a_folder_of_its_own_is_refused(project, tmp_path, value):
    value = value.format(outside=tmp_path)
    (project / "pyproject.toml").write_text(f"[tool.ptlint]\ncache-dir = {json.dumps(value)}\n")
    before = files_of(tmp_path)
    for args in (["src"], ["src", "--fix", "--unsafe-fixes"], ["clean"]):
        proc = cached(project, *args)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        [line] = proc.stderr.splitlines()
        assert line.startswith("error: ") and "cache-dir" in line and repr(value) in line
        assert "Traceback" not in proc.stderr
    assert files_of(tmp_path) == before  # nothing written, nothing removed
    if value in ("src", "src/", "src/train.py"):  # a valid name, but not a folder of ptlint's: --no-cache runs
        assert cached(project, "src", "--no-cache").returncode == 1


def test_a_cache_folder_is_created_tagged_and_clean_removes_only_what_ptlint_wrote(project):
    (project / "pyproject.toml").write_text('[tool.ptlint]\ncache-dir = "build/lint-cache"\n')
    assert cached(project, "src").returncode == 1
    folder = project / "build" / "lint-cache"
    tag = (folder / "CACHEDIR.TAG").read_text()
    assert tag.startswith("Signature: 8a477f597d28d172789f06886806bc55\n") and "ptlint" in tag
    assert (folder / ".gitignore").read_text() == "# created by ptlint\n*\n"
    assert not (project / ".gitignore").exists()
    (folder / "mine.txt").write_text("not ptlint's\n")
    proc = cached(project, "clean")
    assert proc.returncode == 0
    assert files_of(folder) == {"mine.txt", "CACHEDIR.TAG", ".gitignore"}
    assert "kept 1 entry ptlint did not write" in proc.stderr
    (folder / "mine.txt").unlink()
    assert cached(project, "clean").returncode == 0
    assert not folder.exists() and (project / "build").is_dir()
    assert files_of(project) == {"src", "src/train.py", "notes.txt", "pyproject.toml", "build"}


def test_an_empty_folder_is_adopted_and_a_cache_of_an_untagged_release_kept(project):
    (project / ".ptlint_cache").mkdir()
    assert cached(project, "src").returncode == 1
    assert (project / ".ptlint_cache" / "CACHEDIR.TAG").is_file()
    assert cached(project, "clean").returncode == 0 and not (project / ".ptlint_cache").exists()
    old = project / ".ptlint_cache"  # as ptlint 0.1.0 left it: .gitignore and a version folder
    (old / "0.0.9" / "ab").mkdir(parents=True)
    (old / "0.0.9" / "ab" / ("ab" + "0" * 62)).write_bytes(b"entry")
    (old / ".gitignore").write_text("# created by ptlint\n*\n")
    assert cached(project, "src").returncode == 1
    assert cached(project, "clean").returncode == 0 and not old.exists()


def test_a_dangling_gitignore_link_in_the_cache_creates_nothing(project, tmp_path):
    assert cached(project, "src").returncode == 1
    ignore = project / ".ptlint_cache" / ".gitignore"
    ignore.unlink()
    target = tmp_path / "elsewhere" / "created"
    (tmp_path / "elsewhere").mkdir()
    ignore.symlink_to(target)
    (project / "src" / "other.py").write_text(DP + "# changed\n")  # a new entry is written
    assert cached(project, "src").returncode == 1
    assert not target.exists()
    for entry in ("CACHEDIR.TAG", ".gitignore"):  # nor a link of the same name, elsewhere
        (project / ".ptlint_cache" / entry).unlink()
        (project / ".ptlint_cache" / entry).symlink_to(target)
    assert cached(project, "src").returncode == 2  # no longer ptlint's: refused
    assert not target.exists()


def test_clean_of_a_symlinked_cache_removes_the_entries_it_points_to(project, tmp_path):
    outside = tmp_path / "fast-disk" / "cache"
    outside.mkdir(parents=True)
    (project / ".ptlint_cache").symlink_to(outside)
    assert cached(project, "src").returncode == 1
    assert any(p.is_file() and len(p.name) == 64 for p in outside.rglob("*"))
    proc = cached(project, "clean")
    assert proc.returncode == 0 and "removed the cache" in proc.stderr
    assert list(outside.iterdir()) == []  # the link and its folder stay, empty
    assert (project / ".ptlint_cache").is_symlink()
    assert cached(project, "src").returncode == 1  # and serve again
    assert cached(project, "src").returncode == 1


def test_a_cache_dir_linked_to_the_project_is_refused(project):
    (project / ".ptlint_cache").symlink_to(project)
    assert cached(project, "src").returncode == 2
    assert cached(project, "clean").returncode == 2
    assert (project / "src" / "train.py").read_text() == DP and (project / "notes.txt").exists()


def test_cache_dir_on_the_command_line_or_in_the_environment_may_lie_outside_the_project(
        project, tmp_path):
    """As ruff's --cache-dir and RUFF_CACHE_DIR: the user's own choice, relative to the
    current folder, for every configuration (a CI job caches one folder for all)."""
    (project / "pyproject.toml").write_text('[tool.ptlint]\ncache-dir = "ignored"\n')
    shared = tmp_path / "ci-cache"
    assert cached(project, "src", "--cache-dir", "../ci-cache").returncode == 1
    assert (shared / "CACHEDIR.TAG").is_file()
    entries = {p for p in shared.rglob("*") if len(p.name) == 64}
    assert entries and not (project / "ignored").exists()
    proc = cached(project, "src", "--output-format", "concise", PTLINT_CACHE_DIR=str(shared))
    assert proc.returncode == 1 and "PTL102" in proc.stdout
    assert {p for p in shared.rglob("*") if len(p.name) == 64} == entries  # answered from it
    proc = cached(project, "src", "--show-settings", PTLINT_CACHE_DIR=str(shared))
    assert f"cache-dir = {json.dumps(str(shared))}" in proc.stdout
    proc = cached(project, "clean", PTLINT_CACHE_DIR=str(shared))
    assert proc.returncode == 0 and "removed the cache" in proc.stderr
    assert not any(len(p.name) == 64 for p in shared.rglob("*"))
    # still ptlint's own folder, never the project or one that holds it
    for value in (".", "..", str(tmp_path / "notes")):
        (tmp_path / "notes").mkdir(exist_ok=True)
        (tmp_path / "notes" / "mine.txt").write_text("mine\n")
        before = files_of(tmp_path)
        proc = cached(project, "src", "--cache-dir", value)
        assert proc.returncode == 2 and proc.stderr.startswith("error: cache-dir ")
        assert "Traceback" not in proc.stderr and files_of(tmp_path) == before
    # a configuration's own cache-dir is still held to the project
    (project / "pyproject.toml").write_text(f"[tool.ptlint]\ncache-dir = {json.dumps(str(shared))}\n")
    assert cached(project, "src").returncode == 2


# -- the cache answers only for the file and settings it was made for (item 9) -----------------
def test_same_content_in_another_folder_is_not_answered_from_the_cache(project):
    """The key is the resolved path, not the path as typed: per-file-ignores make
    the same text clean in tests/ and a finding in src/."""
    (project / "pyproject.toml").write_text('[tool.ptlint.per-file-ignores]\n"tests/**" = ["PTL102"]\n')
    (project / "tests").mkdir()
    (project / "tests" / "train.py").write_text(DP)
    assert cached(project, "train.py", cwd=project / "tests").returncode == 0
    proc = cached(project, "train.py", "--output-format", "concise", cwd=project / "src")
    assert proc.returncode == 1 and proc.stdout.startswith("train.py:2:5: PTL102")
    typed = str(project / "src" / "train.py")
    proc = cached(project, typed, "--output-format", "concise", cwd=project / "src")
    assert proc.stdout.startswith(f"{typed}:2:5: PTL102")  # named as typed, served from the cache


def _entry(project: Path, path: str, **env: str) -> Path:
    """Where the cache keeps `path`'s findings: anyone can compute it (in the
    environment ptlint runs in: its rules' code is part of the key)."""
    script = ("import sys; from pathlib import Path; from ptlint.config_files import load_config; "
              "from ptlint.io.cache import Cache; p = sys.argv[1]; "
              "print(Cache(load_config(None)).key(p, Path(p).read_bytes()))")
    key = subprocess.run([sys.executable, "-c", script, path], cwd=project, env=_env(**env),
                         capture_output=True, text=True, check=True).stdout.strip()
    folder = project / ".ptlint_cache" / __import__("ptlint").__version__ / key[:2]
    return folder / key


@pytest.mark.parametrize("fmt", ["concise", "sarif"])
def test_a_crafted_cache_entry_neither_hides_findings_nor_crashes(project, tmp_path, fmt,
                                                                 monkeypatch):
    import hashlib
    import hmac
    import pickle

    from ptlint.model import Finding, Position, Span

    monkeypatch.chdir(project)
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert cached(project, "src", **env).returncode == 1  # the cache exists, and the user's key
    entry = _entry(project, "src/train.py", **env)
    assert entry.is_file()
    unknown = [Finding("src/train.py", "PTL999", "made-up", "made up", Span(Position(1, 0),
                                                                        Position(1, 1)))]

    def signed(body: bytes) -> bytes:
        secret = (tmp_path / "xdg" / "ptlint" / "key").read_bytes()
        return hmac.new(secret, entry.name.encode() + b"\0" + body, hashlib.sha256).digest() + body

    for crafted in [
        lambda: pickle.dumps([]),  # unsigned: what a repository could ship
        lambda: pickle.dumps(unknown),
        lambda: b"\0" * 32 + pickle.dumps([]),  # signed with a key that is not the user's
        lambda: signed(pickle.dumps(unknown)),  # signed, but not a finding this run makes
    ]:
        entry.write_bytes(crafted())
        proc = cached(project, "src", "--output-format", fmt, **env)
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "PTL102" in proc.stdout and "PTL999" not in proc.stdout


# -- worker processes (items 3, 21) -------------------------------------------------------
def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for an init that may never reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_for(condition, seconds: float = 120) -> bool:
    """Poll a condition that holds at once or never: the bound only ends a failure."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("how", ["SIGKILL to ptlint", "SIGHUP to the terminal's processes"])
def test_workers_end_with_ptlint(tmp_path, how):
    """A closed terminal, SIGKILL or the OOM killer: no worker goes on fixing files."""
    pids = tmp_path / "pids"
    pids.mkdir()
    src = tmp_path / "src"
    src.mkdir()
    for i in range(8):  # each blocks the worker that lints it
        (src / f"f{i}.py").write_text(DP + pool_padding(8) + "# BLOCK-ME\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "ptlint", "--no-cache", "-j", "2", "--select", "PTL997", "--fix",
         str(src)], env=_env(PTLINT_TEST_PID_DIR=str(pids)), stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True)
    workers: list[int] = []
    try:
        assert _wait_for(lambda: len(list(pids.iterdir())) == 2)
        workers = [int(p.name) for p in pids.iterdir()]
        assert proc.pid not in workers and all(map(_alive, workers))
        if how.startswith("SIGKILL"):
            proc.kill()
        else:
            os.killpg(proc.pid, signal.SIGHUP)
        proc.wait(timeout=60)
        assert _wait_for(lambda: not any(map(_alive, workers)), 60), "workers outlived ptlint"
    finally:
        for pid in [*workers, proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _linted_by(tmp_path, *args: str) -> tuple[int, set[int]]:
    """Lint `src` (no cache unless `args` say otherwise); ptlint's process id, and
    the ids of the processes that linted a file (PTL997 notes them)."""
    pids = tmp_path / "pids"
    shutil.rmtree(pids, ignore_errors=True)
    pids.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ptlint", "-j", "2", "--select", "PTL102,PTL997",
         "--output-format", "concise", *args, "src"], cwd=tmp_path,
        env=_env(PTLINT_TEST_PID_DIR=str(pids)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    out, err = proc.communicate(timeout=300)
    assert out.count("PTL102") == len(list((tmp_path / "src").iterdir())) and not err, err
    return proc.pid, {int(p.name) for p in pids.iterdir()}


@pytest.mark.parametrize("files, padded, pooled", [
    (6, False, False),  # a few small files: the pre-commit case
    (6, True, True),
    (1, True, False),  # one file, however large: nothing to share
])
def test_a_pool_only_for_enough_source(tmp_path, files, padded, pooled):
    """Too few or too small files are linted in ptlint's own process: starting
    workers would cost more than they save. With enough source, two workers
    share the files."""
    (tmp_path / "src").mkdir()
    for i in range(files):
        (tmp_path / "src" / f"f{i}.py").write_text(DP + (pool_padding(files) if padded else ""))
    pid, linted_by = _linted_by(tmp_path, "--no-cache")
    if pooled:  # by workers (one may have taken every file before the other started)
        assert linted_by and pid not in linted_by
    else:
        assert linted_by == {pid}


def test_a_pool_only_for_enough_source_the_cache_does_not_answer(tmp_path):
    """On a warm cache, a few changed files among larger ones are linted in
    ptlint's own process: what decides is the source left to lint."""
    (tmp_path / "src").mkdir()
    for i in range(6):
        (tmp_path / "src" / f"f{i}.py").write_text(DP + pool_padding(6))
    pid, linted_by = _linted_by(tmp_path)
    assert linted_by and pid not in linted_by  # cold: workers
    for i in range(4):  # changed: less than a pool's worth
        (tmp_path / "src" / f"f{i}.py").write_text(DP + pool_padding(6) + "x = 1\n")
    pid, linted_by = _linted_by(tmp_path)
    assert linted_by == {pid}


def test_a_dead_worker_is_replaced_and_the_pool_kept(tmp_path):
    """The file that kills a worker is found and skipped; the other files still go
    to a pool of two workers, not to a fresh process each."""
    pids = tmp_path / "pids"
    pids.mkdir()
    src = tmp_path / "src"
    src.mkdir()
    for i in range(40):  # the largest file goes first: every other result is lost with it
        (src / f"f{i:02}.py").write_text(DP + pool_padding(40) + (
            "# CRASH-ME\n" + "# padding\n" * 100 if i == 7 else ""))
    proc = ptlint(str(src), "-j", "2", "--select", "PTL102,PTL994,PTL997", "--output-format",
                  "concise", env=_env(PTLINT_TEST_PID_DIR=str(pids)))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: {src / 'f07.py'}: ptlint's worker process died on this file (a crash in the "
        "parser, or out of memory); file skipped"]
    assert proc.stdout.count("PTL102") == 39
    # two pools of two broken by the file, it alone, then a pool of two for the rest
    assert len(list(pids.iterdir())) <= 7
