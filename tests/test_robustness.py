"""No input crashes ptlint, and --fix never loses a byte it should not touch (issue 6).

Each input of the issue goes through the command line as a user runs it. The
rules that misbehave on purpose (PTL990-PTL996) and the file that vanishes
between discovery and reading come from tests/robust_plugin, a sitecustomize
put on PYTHONPATH for those subprocesses only.
"""
from __future__ import annotations

import difflib
import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, fixture_dirs, pool_padding, run_cli, settings_for
from ptlint.config import OUTPUT_FORMATS, Settings, validate
from ptlint.engine.fix import fix_text
from ptlint.engine.guard import DEPTH_LIMIT, nesting
from ptlint.engine.job import Job
from ptlint.engine.lint import lint_text
from ptlint.engine.run import process_file
from ptlint.io.diff import unified_diff

PLUGIN = Path(__file__).resolve().parent / "robust_plugin"
DP = "import torch\nm = torch.nn.DataParallel(model.cuda())\n"
BOM = b"\xef\xbb\xbf"


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGIN), env.get("PYTHONPATH")]))
    env["PTLINT_TEST_RULES"] = "1"
    env.pop("NO_COLOR", None)
    env.update(extra)
    return env


def ptlint(*args: str, env: dict[str, str] | None = None, **kw) -> subprocess.CompletedProcess:
    proc = run_cli("--no-cache", *args, env=env or _env(), **kw)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    return proc


def errors_of(proc) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error: ")]


def fixed(text: str, *codes: str) -> str:
    return fix_text(text, "x.py", settings_for(*(codes or ("PTL102",))), unsafe=True).text


# -- the zoo: every awkward input, linted in one run --------------------------------
ZOO: dict[str, bytes] = {
    "syntax_error.py": b"def f(:\n    pass\n",
    "python2.py": b'print "hello"\nexec "x = 1"\n',
    "not_utf8.py": b'x = 1\ns = "\xff\xfe"\n',
    "not_utf8_late.py": b"x = 1\ny = 2\nz = '\xff'\n",
    "latin1_cookie.py": (b"# -*- coding: latin-1 -*-\nimport torch\nname = 'caf\xe9'\n"
                         b"m = torch.nn.DataParallel(model.cuda())\n"),
    "rot13_cookie.py": b"# coding: rot13\nx = 1\n",
    "bom.py": BOM + DP.encode(),
    "crlf.py": DP.replace("\n", "\r\n").encode(),
    "mixed_endings.py": b"import torch\r\nx = 1\nm = torch.nn.DataParallel(model.cuda())\r\ny = 2\n",
    "cr_only.py": DP.replace("\n", "\r").encode(),
    "formfeed_tabs.py": (b"import torch\n\x0c\ndef f(model):\n\tif model:\n"
                         b"\t\treturn torch.nn.DataParallel(model.cuda())\n"),
    "null_byte.py": b"x = 1\ny = 2\x00\n",
    "null_in_comment.py": b"import torch\n# \x00\nm = torch.nn.DataParallel(model.cuda())\n",
    "empty.py": b"",
    "deep_parens.py": ("x = " + "(" * 1000 + "1" + ")" * 1000 + "\n").encode(),
    "long_sum.py": ("x = " + "+".join(["a"] * 100_000) + "\n").encode(),
    # it mentions DataParallel, so a rule needs it parsed (a file no rule needs
    # only gets CPython's syntax check, which accepts it)
    "deep_subscripts.py": ("import torch\nx = a" + "[0]" * 600
                           + "\nm = torch.nn.DataParallel(m.cuda())\n").encode(),
    "x.py/inside.py": DP.encode(),  # a directory named x.py
}


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    root = tmp_path_factory.mktemp("zoo")
    for name, data in ZOO.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    os.symlink("loop_b.py", root / "loop_a.py")  # a symlink loop
    os.symlink("loop_a.py", root / "loop_b.py")
    return root


@pytest.fixture(scope="module", params=["1", "2"], ids=["serial", "parallel"])
def zoo_run(zoo, request):
    started = time.monotonic()
    proc = ptlint(str(zoo), "--select", "PTL102", "--output-format", "json", "-j", request.param)
    elapsed = time.monotonic() - started
    findings: dict[str, list[dict]] = {}
    for f in json.loads(proc.stdout):
        findings.setdefault(Path(f["path"]).relative_to(zoo).as_posix(), []).append(f)
    return proc, findings, elapsed


def _where(findings: list[dict]) -> list[tuple]:
    return [(f["code"], f["line"], f["column"]) for f in findings]


def test_zoo_run_completes_with_exit_2_for_the_skipped_file(zoo_run):
    proc, findings, elapsed = zoo_run
    assert proc.returncode == 2  # deep_subscripts.py is skipped with an error
    assert elapsed < 120  # generous: it is ~5 s; a hang or quadratic blow-up is minutes


def test_syntax_error_is_ptl000_at_cpythons_position(zoo_run):
    _, findings, _ = zoo_run
    assert _where(findings["syntax_error.py"]) == [("PTL000", 1, 7)]


def test_python2_file_gets_pythons_message(zoo_run):
    _, findings, _ = zoo_run
    [f] = findings["python2.py"]
    assert (f["code"], f["line"]) == ("PTL000", 1)
    assert "print" in f["message"]


def test_not_utf8_names_the_byte(zoo_run):
    _, findings, _ = zoo_run
    [f] = findings["not_utf8.py"]
    assert (f["code"], f["line"], f["column"]) == ("PTL000", 2, 6)
    assert "0xff" in f["message"] and "coding" in f["message"]
    [f] = findings["not_utf8_late.py"]
    assert (f["code"], f["line"], f["column"]) == ("PTL000", 3, 6)


def test_latin1_cookie_is_decoded_as_python_does(zoo_run):
    _, findings, _ = zoo_run
    assert _where(findings["latin1_cookie.py"]) == [("PTL102", 4, 5)]


def test_cookie_naming_a_non_text_codec(zoo_run):
    _, findings, _ = zoo_run
    [f] = findings["rot13_cookie.py"]
    assert f["code"] == "PTL000" and "rot13" in f["message"]


@pytest.mark.parametrize("name, line, column", [
    ("bom.py", 2, 5), ("crlf.py", 2, 5), ("mixed_endings.py", 3, 5), ("cr_only.py", 2, 5),
    ("formfeed_tabs.py", 5, 10), ("x.py/inside.py", 1 + 1, 5),
])
def test_odd_but_valid_files_are_linted(zoo_run, name, line, column):
    _, findings, _ = zoo_run
    assert _where(findings[name]) == [("PTL102", line, column)]


def test_null_byte_is_located(zoo_run):
    _, findings, _ = zoo_run
    [f] = findings["null_byte.py"]
    assert (f["code"], f["line"], f["column"]) == ("PTL000", 2, 6)
    assert "null" in f["message"]
    # LibCST accepts a null byte in a comment; Python does not, nor does ptlint
    assert _where(findings["null_in_comment.py"]) == [("PTL000", 2, 3)]


def test_empty_file(zoo_run):
    _, findings, _ = zoo_run
    assert "empty.py" not in findings


def test_too_many_nested_parentheses_is_pythons_syntax_error(zoo_run):
    _, findings, _ = zoo_run
    [f] = findings["deep_parens.py"]
    assert f["code"] == "PTL000" and "nested" in f["message"]


def test_100k_term_sum_is_rejected_without_hanging(zoo_run):
    # CPython itself cannot compile it; LibCST would take hours or overflow the C stack.
    proc, findings, _ = zoo_run
    reported = [f["message"] for f in findings.get("long_sum.py", [])]
    reported += [e for e in errors_of(proc) if "long_sum.py" in e]
    rejected = len(reported) == 1 and "nested" in reported[0]
    # no rule needs the file, so only CPython's parser checks it; before 3.11 that
    # parser accepts it (only its compiler fails), as ruff's does
    assert rejected or sys.version_info < (3, 11) and reported == []


def test_valid_but_too_deep_file_is_skipped_with_one_line(zoo_run):
    proc, findings, _ = zoo_run
    assert "deep_subscripts.py" not in findings
    [line] = [e for e in errors_of(proc) if "deep_subscripts.py" in e]
    assert re.search(r"deep_subscripts\.py:2: expression nested about \d+ levels deep", line)


def test_symlink_loop_inside_a_folder_is_skipped(zoo_run):
    proc, findings, _ = zoo_run
    assert not any("loop_" in k for k in findings)
    assert not any("loop_" in e for e in errors_of(proc))


def test_only_the_expected_errors(zoo_run):
    proc, _, _ = zoo_run
    assert [e for e in errors_of(proc) if "long_sum" not in e] == [
        e for e in errors_of(proc) if "deep_subscripts.py" in e
    ]


# -- paths ------------------------------------------------------------------------
def test_missing_path_exit_2_and_the_rest_is_linted(tmp_path):
    (tmp_path / "ok.py").write_text(DP)
    proc = ptlint(str(tmp_path / "nope.py"), str(tmp_path / "ok.py"), "--select", "PTL102",
                  "--output-format", "concise")
    assert proc.returncode == 2
    assert errors_of(proc) == [f"error: {tmp_path / 'nope.py'}: no such file or directory"]
    assert "ok.py:2:5: PTL102" in proc.stdout


def test_symlink_loop_named_on_the_command_line(tmp_path):
    os.symlink("b.py", tmp_path / "a.py")
    os.symlink("a.py", tmp_path / "b.py")
    proc = ptlint(str(tmp_path / "a.py"))
    assert proc.returncode == 2
    assert errors_of(proc) == [f"error: {tmp_path / 'a.py'}: symbolic link loop"]


def test_file_deleted_between_discovery_and_reading(tmp_path):
    for name in ("a.py", "b.py", "c.py"):
        (tmp_path / name).write_text(DP)
    env = _env(PTLINT_TEST_VANISH=str(tmp_path / "b.py"))
    proc = ptlint(str(tmp_path), "--select", "PTL102", "--output-format", "concise", env=env)
    assert proc.returncode == 2
    assert errors_of(proc) == [f"error: {tmp_path / 'b.py'}: cannot read: No such file or directory"]
    assert "a.py:2:5: PTL102" in proc.stdout and "c.py:2:5: PTL102" in proc.stdout


def test_unreadable_file(tmp_path, monkeypatch):
    path = tmp_path / "secret.py"
    path.write_text(DP)
    if os.geteuid() != 0:  # as a user, through the CLI
        path.chmod(0)
        proc = ptlint(str(path))
        assert proc.returncode == 2 and "cannot read: Permission denied" in proc.stderr
        return
    # root reads anything: make the read fail in-process instead
    real = Path.read_bytes

    def read_bytes(self):
        if self == path:
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    out = process_file(path, Job(settings_for("PTL102"), cache=False))
    assert out.errors == [f"{path}: cannot read: Permission denied"]


@pytest.mark.parametrize("fmt", OUTPUT_FORMATS)
def test_file_name_that_is_not_utf8_with_a_strict_terminal(tmp_path, fmt):
    (tmp_path / os.fsdecode(b"caf\xe9.py")).write_text(DP)
    env = _env(PYTHONIOENCODING="utf-8:strict")
    for _ in range(2):  # the second run reads the cache
        proc = run_cli(".", "--select", "PTL102", "--output-format", fmt, cwd=tmp_path, env=env)
        assert "Traceback" not in proc.stderr and "error" not in proc.stderr, proc.stderr
        assert proc.returncode == 1


def test_cache_entries_that_are_damaged_or_crafted_are_misses(tmp_path):
    import pickle

    from ptlint.io.cache import Cache

    settings = settings_for("PTL102", root=tmp_path)
    cache = Cache(settings)
    key = cache.key("a.py", DP.encode())
    findings = lint_text(DP, "a.py", settings).findings
    cache.put(key, findings)
    assert cache.get(key, "a.py") == findings
    entry = cache.folder / key[:2] / key
    entry.write_bytes(b"\x80\x04garbage")
    assert cache.get(key, "a.py") is None

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'pwned'}",))

    entry.write_bytes(pickle.dumps([Payload()]))
    assert cache.get(key, "a.py") is None
    assert not (tmp_path / "pwned").exists()


# -- rules that fail ------------------------------------------------------------------
def test_rule_that_raises_one_line_other_findings_kept(tmp_path):
    (tmp_path / "a_boom.py").write_text(DP + "x = boom\n")
    (tmp_path / "b_ok.py").write_text(DP)
    (tmp_path / "c_init.py").write_text(DP + "init_boom = 1\n")
    (tmp_path / "d_foreign.py").write_text(DP + "foreign\n")
    proc = ptlint(str(tmp_path), "--select", "PTL102,PTL990,PTL995,PTL996",
                  "--output-format", "concise")
    assert proc.returncode == 2
    assert errors_of(proc) == [
        f"error: {tmp_path / 'a_boom.py'}: internal error in PTL990: RuntimeError: injected failure",
        f"error: {tmp_path / 'c_init.py'}: internal error in PTL996: ValueError: injected "
        "constructor failure",
        f"error: {tmp_path / 'd_foreign.py'}: internal error in PTL995: it reported a node that "
        "is not in this file's tree",
    ]
    for name in ("a_boom.py", "b_ok.py", "c_init.py", "d_foreign.py"):  # other rules still ran
        assert f"{name}:2:5: PTL102" in proc.stdout


def test_worker_process_that_dies_costs_one_file(tmp_path):
    for i in range(6):
        (tmp_path / f"f{i}.py").write_text(DP + pool_padding(6) + ("# CRASH-ME\n" if i == 2 else ""))
    proc = ptlint(str(tmp_path), "-j", "2", "--select", "PTL102,PTL994", "--output-format",
                  "concise")
    assert proc.returncode == 2
    assert errors_of(proc) == [f"error: {tmp_path / 'f2.py'}: ptlint's worker process died on "
                               "this file (a crash in the parser, or out of memory); file skipped"]
    assert proc.stdout.count("PTL102") == 5


# -- --fix ------------------------------------------------------------------------
FIXABLE = ["latin1_cookie.py", "bom.py", "crlf.py", "mixed_endings.py", "cr_only.py",
           "formfeed_tabs.py", "x.py/inside.py"]
_BREAK = re.compile(r"\r\n|\r|\n")


def _lines(text: str) -> list[str]:
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", text)


def _apply_json_edits(text: str, findings: list[dict]) -> str:
    """Apply the edits the JSON output promised, independently of the engine."""
    starts = [0, *(m.end() for m in _BREAK.finditer(text))]
    spans = sorted(
        (starts[e["location"]["line"] - 1] + e["location"]["column"] - 1,
         starts[e["end_location"]["line"] - 1] + e["end_location"]["column"] - 1, e["content"])
        for f in findings if f["fix"] for e in f["fix"]["edits"]
    )
    out, last = [], 0
    for begin, end, content in spans:
        assert begin >= last, "two applied edits overlap"
        out += [text[last:begin], content]
        last = end
    return "".join(out) + text[last:]


_IMPORT = re.compile(r"\s*(import \S|from \S+ import \S)")


def assert_only_imports_added(expected: str, actual: str) -> None:
    """`actual` is `expected` plus import lines (and blank lines around them), or with
    existing import lines extended: nothing else may differ."""
    a, b = _lines(expected), _lines(actual)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        assert tag in ("insert", "replace"), (tag, a[i1:i2])
        assert all(_IMPORT.match(x) for x in a[i1:i2]), a[i1:i2]
        assert all(_IMPORT.match(x) or not x.strip() for x in b[j1:j2]), b[j1:j2]


@pytest.fixture
def fix_dir(zoo, tmp_path):
    for name in FIXABLE:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(zoo / name, tmp_path / name)
    return tmp_path


def test_fix_writes_only_the_promised_edits_and_imports(fix_dir):
    before = {name: (fix_dir / name).read_bytes() for name in FIXABLE}
    proc = ptlint(str(fix_dir), "--select", "PTL102", "--unsafe-fixes", "--output-format", "json")
    promised: dict[str, list[dict]] = {}
    for f in json.loads(proc.stdout):
        promised.setdefault(Path(f["path"]).relative_to(fix_dir).as_posix(), []).append(f)
    proc = ptlint(str(fix_dir), "--select", "PTL102", "--fix", "--unsafe-fixes")
    assert proc.returncode == 0, proc.stderr
    for name in FIXABLE:
        encoding = "latin-1" if "latin1" in name else "utf-8-sig"
        text = before[name].decode(encoding)
        after = (fix_dir / name).read_bytes().decode(encoding)
        assert after != text
        assert_only_imports_added(_apply_json_edits(text, promised[name]), after)


def test_fix_keeps_encoding_bom_line_endings_mode_and_symlinks(fix_dir):
    (fix_dir / "crlf.py").chmod(0o751)
    os.symlink("bom.py", fix_dir / "link_to_bom.py")
    before = {name: (fix_dir / name).read_bytes() for name in FIXABLE}
    proc = ptlint(str(fix_dir / "link_to_bom.py"), *[str(fix_dir / n) for n in FIXABLE if n != "bom.py"],
                  "--select", "PTL102", "--fix", "--unsafe-fixes")
    assert proc.returncode == 0, proc.stderr
    after = {name: (fix_dir / name).read_bytes() for name in FIXABLE}
    # latin-1 stays latin-1: the é is still the single byte 0xe9
    assert b"caf\xe9" in after["latin1_cookie.py"]
    assert after["latin1_cookie.py"].decode("latin-1") == fixed(before["latin1_cookie.py"].decode("latin-1"))
    # the BOM is kept, written through the symlink, which stays a symlink
    assert os.path.islink(fix_dir / "link_to_bom.py")
    assert after["bom.py"].startswith(BOM) and not after["bom.py"][3:].startswith(BOM)
    # every line break of a CRLF (or CR) file is still CRLF (CR), inserted lines included
    assert re.findall(rb"\r\n|\r|\n", after["crlf.py"]) == [b"\r\n"] * after["crlf.py"].count(b"\n")
    assert after["cr_only.py"].count(b"\r") == len(_lines(after["cr_only.py"].decode()))
    assert b"\n" not in after["cr_only.py"] and after["cr_only.py"].endswith(b"\r")
    # mixed endings: each original line keeps its own ending
    old_lines = _lines(before["mixed_endings.py"].decode())
    new_lines = _lines(after["mixed_endings.py"].decode())
    assert old_lines[0] in new_lines and "x = 1\n" in new_lines and new_lines[-1] == "y = 2\n"
    assert stat.S_IMODE((fix_dir / "crlf.py").stat().st_mode) == 0o751
    assert not list(fix_dir.rglob("*.ptlint-tmp"))
    # and a second run changes nothing
    proc = ptlint(str(fix_dir), "--select", "PTL102", "--fix", "--unsafe-fixes")
    assert proc.returncode == 0, proc.stderr
    assert {name: (fix_dir / name).read_bytes() for name in FIXABLE} == after


def test_diff_applies_with_patch_even_with_form_feeds(fix_dir):
    text = "import torch\nx = 1; \x0c y = 2\nm = torch.nn.DataParallel(model.cuda())"  # no final newline
    diff = unified_diff("x.py", text, fixed(text))
    assert "\\ No newline at end of file" in diff
    (fix_dir / "x.py").rename(fix_dir / "folder")
    (fix_dir / "x.py").write_bytes(text.encode())
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "apply", "-"], input=diff.encode(), cwd=fix_dir, check=True)
    assert (fix_dir / "x.py").read_bytes().decode() == fixed(text)


@pytest.mark.parametrize("data", [
    b'x = "\xff"\n',  # not UTF-8: PTL000, printed back unchanged
    b"def f(:\n",  # a syntax error
    b"# -*- coding: latin-1 -*-\nimport torch\ns = 'caf\xe9'\nm = torch.nn.DataParallel(model.cuda())\n",
    BOM + DP.replace("\n", "\r\n").encode(),
    b"",
], ids=["not-utf8", "syntax-error", "latin1", "bom-crlf", "empty"])
def test_stdin_fix_prints_the_file_in_its_own_bytes(data):
    """Editors pipe the buffer through `ptlint - --fix` and replace it with the output."""
    proc = subprocess.run([sys.executable, "-m", "ptlint", "-", "--fix", "--unsafe-fixes",
                           "--select", "PTL102"], input=data, capture_output=True, timeout=120)
    assert b"Traceback" not in proc.stderr
    from ptlint.io.text import DecodeError, decode, encode

    try:
        source = decode(data)
    except DecodeError:
        assert proc.stdout == data
        return
    assert proc.stdout == encode(source, fixed(source.text))


def test_read_only_file_is_reported_not_fixed(tmp_path):
    (tmp_path / "a.py").write_text(DP)
    (tmp_path / "b.py").write_text(DP)
    (tmp_path / "a.py").chmod(0o444)
    proc = ptlint(str(tmp_path), "--select", "PTL102", "--fix", "--unsafe-fixes")
    assert proc.returncode == 2
    assert errors_of(proc) == [f"error: {tmp_path / 'a.py'}: file is read-only; 1 fix(es) not written"]
    assert (tmp_path / "a.py").read_text() == DP
    assert (tmp_path / "b.py").read_text() == fixed(DP)


def test_fix_that_breaks_the_file_is_not_written(tmp_path):
    text = "x = break_me\n" + DP
    (tmp_path / "a.py").write_text(text)
    proc = ptlint(str(tmp_path / "a.py"), "--select", "PTL991", "--fix")
    assert proc.returncode == 2
    assert errors_of(proc) == [f"error: {tmp_path / 'a.py'}:1: fix for PTL991 would break the "
                               "file; not applied"]
    assert (tmp_path / "a.py").read_text() == text


def test_overlapping_fixes_never_both_apply(tmp_path):
    (tmp_path / "a.py").write_text("x = overlap_me(a)\n")
    proc = ptlint(str(tmp_path / "a.py"), "--select", "PTL992", "--fix")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "a.py").read_text() == "x = outer_fix\n"


def test_fix_loop_stops_at_its_bound_and_says_so(tmp_path):
    (tmp_path / "a.py").write_text("x = spin_0\n")
    proc = ptlint(str(tmp_path / "a.py"), "--select", "PTL993", "--fix")
    assert proc.returncode == 2
    assert errors_of(proc) == [f"error: {tmp_path / 'a.py'}: fixes did not converge after 10 passes"]
    assert re.fullmatch(r"x = spin_\d+\n", (tmp_path / "a.py").read_text())


def test_form_feed_before_a_statement_is_not_fixed(tmp_path):
    # LibCST drops such a form feed and its columns after it are off: no fix is offered.
    text = "import torch\n\x0cm = torch.nn.DataParallel(model.cuda())\n"
    (tmp_path / "a.py").write_bytes(text.encode())
    proc = ptlint(str(tmp_path / "a.py"), "--select", "PTL102", "--output-format", "json")
    [f] = json.loads(proc.stdout)
    assert f["fix"] is None
    proc = ptlint(str(tmp_path / "a.py"), "--select", "PTL102", "--fix", "--unsafe-fixes")
    assert (tmp_path / "a.py").read_bytes().decode() == text


def test_full_output_neutralises_control_characters_and_huge_lines(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nm = torch.nn.DataParallel(model.cuda())  # \x1b[2J\x07\n"
                                   "x = '" + "ab" * 100_000 + "'; torch.nn.DataParallel(model.cuda())\n")
    proc = ptlint(str(tmp_path / "a.py"), "--select", "PTL102")
    assert proc.returncode == 1
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout and "\u241b[2J" in proc.stdout
    assert len(proc.stdout) < 5000
    quoted = [line for line in proc.stdout.splitlines() if line.startswith("3 | ")]
    carets = [line for line in proc.stdout.splitlines() if line.strip().startswith("^")]
    assert len(quoted) == 1 and quoted[0].startswith("3 | …")
    # the caret still points at the call inside the cut line
    assert quoted[0][carets[1].index("^"):].startswith("torch.nn.DataParallel")


def test_ten_megabyte_file(tmp_path):
    code = DP + "".join(f"def f{i}(model):\n    return torch.nn.DataParallel(model.cuda())\n\n\n"
                        for i in range(200))
    filler = ('DATA = """\n' + ("0123456789abcdef" * 6 + "\n") * 100_000 + '"""\n'
              + ("# " + "c" * 97 + "\n") * 3000)
    path = tmp_path / "big.py"
    path.write_text(code + filler)
    assert path.stat().st_size > 10_000_000
    proc = ptlint(str(path), "--select", "PTL102", "--output-format", "concise")
    assert proc.returncode == 1
    assert proc.stdout.count("PTL102") == 201


def test_interrupted_parallel_fix_leaves_each_file_old_or_fully_fixed(tmp_path):
    """SIGINT (to the process group, as Ctrl-C does) or SIGTERM (to ptlint alone) at
    random moments of a parallel --fix: every file is the original or the fixed
    version, no temporary file is left, and ptlint exits 130."""
    source = (FIXTURES / "PTL102_data_parallel" / "bad.py").read_text()
    expected = fixed(source)
    command = [sys.executable, "-m", "ptlint", "--no-cache", "-q", "-j", "2", "--select", "PTL102",
               "--fix", "--unsafe-fixes"]

    def folder_of(name: str) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        for i in range(60):
            (folder / f"m{i:02}.py").write_text(source)
        return folder

    started = time.monotonic()  # how long an uninterrupted run takes here
    subprocess.run([*command, str(folder_of("whole"))], capture_output=True, timeout=300)
    whole = time.monotonic() - started
    rng = random.Random(6)
    interrupted = 0
    for trial in range(12):  # until 3 runs of each signal were caught mid-run
        if interrupted >= 6:
            break
        folder = folder_of(f"t{trial}")
        proc = subprocess.Popen([*command, str(folder)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        time.sleep(rng.uniform(0.1, 0.7) * whole)
        if trial % 2:
            proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        assert b"Traceback" not in err, err.decode()
        states = {path.name: path.read_text() for path in folder.iterdir()}
        assert all(name.endswith(".py") for name in states), f"left behind: {sorted(states)}"
        assert all(text in (source, expected) for text in states.values())
        if proc.returncode == 130:
            interrupted += 1
            assert err.decode().strip().endswith("ptlint: interrupted")
        elif proc.returncode in (-signal.SIGINT, -signal.SIGTERM):
            # the signal came before ptlint installed its handlers: nothing was written
            assert all(text == source for text in states.values())
        else:
            assert proc.returncode == 1, err.decode()  # finished before the signal
    assert interrupted >= 4


# -- in-process: the engine's own guarantees ------------------------------------------
@pytest.mark.parametrize("text, line, column", [
    ("def f(:\n    pass\n", 1, 6),
    ("x = (1,\ny = 2\n", 1, 4),
    ("if x:\nfoo()\n", 2, 0),
    ("x = 1\n  y = 2\n", 2, 1),
    ("def f():\n\treturn 1\n        return 2\n", 3, 0),
    ("x = 'abc\n", 1, 4),
])
def test_syntax_error_positions(text, line, column):
    [f] = lint_text(text, "x.py", settings_for("PTL102")).findings
    assert (f.code, f.span.start.line, f.span.start.column) == ("PTL000", line, column)


def test_nesting_estimate_is_small_on_real_code_and_large_on_deep_code():
    for folder in fixture_dirs():
        for path in folder.glob("*.py"):
            assert nesting(path.read_text())[0] < 40, path
    assert nesting("x = " + "+".join(["a"] * 800))[0] > DEPTH_LIMIT
    assert nesting("x = (\n" + "    'a' + 'b' +\n" * 400 + "    'c')\n")[0] > DEPTH_LIMIT
    assert nesting("x = 1 + \\\n" * 600 + "  2\n")[0] > DEPTH_LIMIT
    # brackets and operators in strings and comments do not count
    assert nesting("x = '((((' + \"[[\" # (((\n" * 600)[0] < 10
    # a large file is counted per paragraph, a paragraph joined to the next while a
    # bracket is open or a line goes on after a backslash
    many = "def f(a, b):\n    return a.b(c[0] + d) * (e - f)\n\n" * 200
    assert nesting(many)[0] == 0
    deep = "x = [(\n" + "    a +\n\n" * 600 + "    a)]\n"
    assert nesting(many + deep + many)[0] > DEPTH_LIMIT
    assert nesting(many + deep.replace("(", "").replace(")", "") + many)[0] > DEPTH_LIMIT
    assert nesting(many + "x = 1 + \\\n" * 300 + "\n" + "  2 + \\\n" * 300 + "  3\n")[0] > 0


def test_libcst_only_failure_is_not_a_syntax_error():
    # More implicitly concatenated strings than LibCST's parser takes (Python is fine).
    text = "B = (\n" + "    'x'\n" * 6000 + ")\n"
    result = lint_text(text, "x.py", settings_for("PTL102"))
    assert not result.findings
    if result.errors:  # LibCST 1.x rejects it; a later version may not
        assert "LibCST cannot parse this file, although Python can" in result.errors[0]


def test_fix_never_writes_through_a_libcst_round_trip_loss():
    text = "import torch\r\nm = torch.nn.DataParallel(model.cuda())\r\n\r"  # ends with a lone \r
    out = fix_text(text, "x.py", settings_for("PTL102"), unsafe=True)
    assert out.applied == 1 and out.text.endswith("DataParallel(model.cuda())\r\n\r")
    text = "import torch\n\x0cm = torch.nn.DataParallel(model.cuda())\n"
    assert fix_text(text, "x.py", settings_for("PTL102"), unsafe=True).text == text


def test_file_saved_by_someone_else_during_fix_is_not_overwritten(tmp_path, monkeypatch):
    from ptlint.engine import run as runner

    path = tmp_path / "a.py"
    path.write_text(DP)
    real = runner.process_text

    def slow_process_text(*args, **kw):
        out = real(*args, **kw)
        path.write_text(DP + "# saved by an editor meanwhile\n")
        return out

    monkeypatch.setattr(runner, "process_text", slow_process_text)
    out = process_file(path, Job(settings_for("PTL102"), "fix", unsafe=True, cache=False))
    assert out.errors == [f"{path}: changed while ptlint was fixing it; not written"]
    assert out.fixed == 0
    assert path.read_text() == DP + "# saved by an editor meanwhile\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]


def test_atomic_write_leaves_nothing_when_interrupted(tmp_path, monkeypatch):
    from ptlint.io import text as textio

    path = tmp_path / "a.py"
    path.write_text("old\n")

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(textio.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        textio.write_atomic(path, b"new\n")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.py"]


WORKERS_IMPORT = """
import sys
from pathlib import Path
from ptlint.config import Settings, validate
from ptlint.engine import pool, run
from ptlint.engine.job import Job

settings = Settings()
validate(settings)
at_fork = []  # the modules the workers would start with


def in_turn(files, work, job, jobs, done):
    at_fork.append(set(sys.modules))
    return [work(path, job) for path in files]


pool.run_in_pool = in_turn
run.POOL_MIN_BYTES = 0
outcomes = run.run([Path(p) for p in sys.argv[1:]], Job(settings, cache=False), jobs=2)
assert at_fork and all(o.findings for o in outcomes), outcomes
print(sorted(set(sys.modules) - at_fork[0]))
"""


def test_workers_start_with_what_linting_imports():
    """Workers are forked once the run has imported what linting needs (LibCST's
    native parser, the rules and what choosing them imports): they import nothing."""
    files = [str(FIXTURES / name / "bad.py") for name in (
        "PTL102_data_parallel", "PTL101_tensor_moved_after_creation",
        "PTL301_torch_load_without_weights_only")]
    proc = subprocess.run([sys.executable, "-c", WORKERS_IMPORT, *files], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_warm_run_answers_cached_files_without_workers(tmp_path, monkeypatch):
    """Cached files are answered in the main process; only changed files go to
    the worker pool, and the results keep the order of the files."""
    from ptlint.engine import pool, run as runner

    settings = settings_for("PTL102", root=tmp_path)
    files = []
    for i in range(6):
        path = tmp_path / f"m{i}.py"
        path.write_text(DP if i % 2 else "x = 1\n")
        files.append(path)
    job = Job(settings)
    monkeypatch.setattr(runner, "POOL_MIN_BYTES", 0)  # tiny files: a pool all the same
    cold = runner.run(files, job, jobs=2)
    pooled: list[list] = []
    real = pool.run_in_pool
    monkeypatch.setattr(pool, "run_in_pool",
                        lambda f, w, j, n, *done: pooled.append(f) or real(f, w, j, n, *done))
    warm = runner.run(files, job, jobs=2)
    assert pooled == []
    assert [o.findings for o in warm] == [o.findings for o in cold]
    assert [o.path for o in warm] == [str(p) for p in files]
    for i in (0, 2, 3, 5):  # four files change: they, and only they, are linted again
        files[i].write_text("x = 2\n" if i % 2 else DP)
    again = runner.run(files, job, jobs=2)
    assert pooled == [[files[0], files[2], files[3], files[5]]]
    assert [bool(o.findings) for o in again] == [True, True, True, False, False, False]


def test_an_edited_rule_is_not_answered_from_the_cache(tmp_path):
    from ptlint.io.cache import code_stamp

    rules = tmp_path / "rules"
    rules.mkdir()
    rule = rules / "ptl999_rule.py"
    rule.write_text("CODE = 1\n")
    before = code_stamp([str(rules)])
    assert code_stamp([str(rules)]) == before
    rule.write_text("CODE = 22\n")  # a developer edits the rule in a source checkout
    assert code_stamp([str(rules)]) != before
    assert code_stamp() != code_stamp([str(rules)])  # the installed code is stamped by default


def test_a_tokenizer_that_fails_with_a_system_error_is_a_syntax_error(monkeypatch):
    """CPython 3.13.0's tokenizer raises SystemError ("returned a result with an
    exception set") on a null byte instead of SyntaxError: the file is still
    reported as PTL000, not as an internal error."""
    import tokenize

    from ptlint.config import Settings, validate
    from ptlint.engine.lint import lint_text
    from ptlint.rule import code_matches

    def failing(readline):
        yield from ()
        raise SystemError("<built-in method __new__> returned a result with an exception set")

    monkeypatch.setattr(tokenize, "generate_tokens", failing)
    settings = Settings(select=["ALL"])
    validate(settings)
    text = "import torch\nx = torch.zeros(3).cuda()  # noqa: PTL101\ny = 1 +\0 2\n"
    result = lint_text(text, "x.py", settings)
    assert result.errors == []
    assert [(f.code, f.span.start.line) for f in result.findings] == [("PTL000", 3)]
    assert code_matches(re.compile("cuda"), "x.cuda()  # cuda")  # cannot tell comments apart
