#!/usr/bin/env python3
"""Run `ptlint --fix --unsafe-fixes` over copies of real code and check the result.

    python bench/fix_sweep.py /work/corpus/timm /work/corpus/yolov5 ...
    python bench/fix_sweep.py --corpus-root /work/corpus timm lightning detectron2

For each corpus: copy its Python files to a temporary folder, run
`ptlint --fix --unsafe-fixes --no-cache` there, then check that

- every file the fix changed still compiles (and LibCST parses it); a notebook stays
  valid JSON and every code cell that parsed before still parses,
- a second `--fix` changes nothing (no file differs, "Fixed 0"),
- no internal error, crashed worker, rejected fix or non-converging fix was reported,
- (with --check-diff, Python files only) `--diff` announced exactly the changes that
  --fix made.

Prints the files, lines, fixes applied and every failure; exits 1 if any.
Not part of `make test`: it runs minutes per corpus. Only the Python files and
notebooks are copied; a corpus's .gitignore files come along so discovery behaves the same.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from ptlint.io.diff import unified_diff  # noqa: E402
from ptlint.io.ipython import mask  # noqa: E402
from ptlint.io.notebook import source_text  # noqa: E402
from ptlint.io.text import DecodeError, decode  # noqa: E402

SUFFIXES = (".py", ".pyi", ".ipynb")
PROBLEMS = re.compile(r"internal error|worker process died|would break the file|did not converge|"
                      r"does not reproduce this file|cannot write|Traceback")
FIXED = re.compile(r"Fixed (\d+) findings?, (\d+) remaining")
CONCISE = re.compile(r"^(?P<path>.+?):\d+:\d+: (?P<code>PTL\d{3}) ", re.M)


def _lines(path: Path) -> int:
    """Lines of Python: a notebook's code cells, not its JSON."""
    if path.suffix != ".ipynb":
        return path.read_bytes().count(b"\n")
    try:
        cells = json.loads(path.read_bytes().decode("utf-8-sig"))["cells"]
        return sum(source_text(c.get("source", "")).count("\n") + 1
                   for c in cells if c.get("cell_type") == "code")
    except (ValueError, KeyError, TypeError, AttributeError):
        return 0


def copy_corpus(source: Path, target: Path, suffixes: tuple[str, ...]) -> tuple[int, int]:
    files = lines = 0
    for folder, dirnames, filenames in os.walk(source):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        here = Path(folder)
        for name in filenames:
            if not (name.endswith(suffixes) or name == ".gitignore"):
                continue
            src = here / name
            if src.is_symlink() or not src.is_file():
                continue
            dst = target / src.relative_to(source)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            if name.endswith(suffixes):
                files += 1
                lines += _lines(dst)
    return files, lines


def snapshot(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*") if p.suffix in SUFFIXES and p.is_file()
    }


def ptlint(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ptlint", *args], cwd=cwd, capture_output=True,
                          text=True, errors="replace")


def compiles(data: bytes) -> str | None:
    """None if the file decodes, parses with LibCST and compiles; else why not."""
    import libcst

    try:
        text = decode(data).text
        libcst.parse_module(text)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<fixed>", "exec", dont_inherit=True)
    except (DecodeError, libcst.ParserSyntaxError, SyntaxError, ValueError, RecursionError) as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def broken_cells(data: bytes) -> set[int] | str:
    """The code cells of a notebook that do not parse (IPython syntax masked),
    or why the notebook is not one."""
    import libcst

    try:
        cells = json.loads(data.decode("utf-8-sig"))["cells"]
    except (ValueError, KeyError, TypeError) as exc:
        return f"not a notebook: {type(exc).__name__}"
    broken = set()
    for number, cell in enumerate(cells, 1):
        masked = mask(source_text(cell.get("source", ""))) if cell.get("cell_type") == "code" else None
        if masked is None:
            continue
        try:
            libcst.parse_module(masked.text)
        except (libcst.ParserSyntaxError, RecursionError):
            broken.add(number)
    return broken


def sweep(name: str, source: Path, args: argparse.Namespace) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"ptlint-sweep-{name}-"))
    copy = work / name
    started = time.monotonic()
    # --diff shows a notebook's cells, not its JSON: --check-diff compares Python files only
    files, lines = copy_corpus(source, copy, SUFFIXES[:2] if args.check_diff else SUFFIXES)
    before = snapshot(copy)
    originals = {rel: (copy / rel).read_bytes() for rel in before
                 if args.check_diff or rel.endswith(".ipynb")}
    common = [".", "--no-cache", "--select", args.select, "-j", str(args.jobs)]
    failures: list[str] = []
    report: dict = {"corpus": name, "files": files, "lines": lines}

    fixable: Counter[str] = Counter()
    if args.per_rule:
        lint = ptlint([*common, "--unsafe-fixes", "--output-format", "json", "--exit-zero"], copy)
        findings = json.loads(lint.stdout or "[]")
        report["findings"] = dict(Counter(f["code"] for f in findings))
        fixable = Counter(f["code"] for f in findings if f["fix"] and f["fix"]["edits"])
        report["fixable"] = dict(fixable)

    announced = ""
    if args.check_diff:
        announced = ptlint([*common, "--unsafe-fixes", "--diff"], copy).stdout

    first = ptlint([*common, "--fix", "--unsafe-fixes", "--output-format", "concise"], copy)
    match = FIXED.search(first.stdout)
    report["fixes_applied"] = int(match.group(1)) if match else None
    report["remaining"] = int(match.group(2)) if match else None
    if match is None:
        failures.append(f"first --fix printed no summary (exit {first.returncode})")
    report["remaining_by_rule"] = dict(Counter(m.group("code") for m in CONCISE.finditer(first.stdout)))
    report["syntax_errors"] = report["remaining_by_rule"].get("PTL000", 0)
    for line in first.stderr.splitlines():
        if PROBLEMS.search(line):
            failures.append(f"first --fix: {line}")
    if first.returncode not in (0, 1) and not failures:
        failures.append(f"first --fix exited {first.returncode}: {first.stderr.strip()[-500:]}")

    after = snapshot(copy)
    changed = sorted(rel for rel in after if after[rel] != before.get(rel))
    report["files_changed"] = len(changed)
    for rel in changed:
        data = (copy / rel).read_bytes()
        if rel.endswith(".ipynb"):
            was, now = broken_cells(originals[rel]), broken_cells(data)
            if isinstance(now, str) or (not isinstance(was, str) and now - was):
                failures.append(f"{rel}: cells no longer parse after --fix: {now}")
            continue
        why = compiles(data)
        if why is not None:
            failures.append(f"{rel}: does not compile after --fix: {why}")
    if set(after) != set(before):
        failures.append(f"files appeared or vanished: {sorted(set(after) ^ set(before))[:10]}")
    leftovers = [p.name for p in copy.rglob("*.ptlint-tmp")]
    if leftovers:
        failures.append(f"temporary files left: {leftovers[:10]}")

    if args.check_diff:
        made = "".join(unified_diff(rel, decode(originals[rel]).text,
                                    decode((copy / rel).read_bytes()).text) for rel in changed)
        said = Counter(l for l in announced.splitlines() if l[:1] in "+-" and l[:3] not in ("+++", "---"))
        did = Counter(l for l in made.splitlines() if l[:1] in "+-" and l[:3] not in ("+++", "---"))
        if said != did:
            failures.append(f"--diff announced {sum(said.values())} changed lines, --fix made "
                            f"{sum(did.values())}")

    second = ptlint([*common, "--fix", "--unsafe-fixes", "--output-format", "concise"], copy)
    match = FIXED.search(second.stdout)
    again = snapshot(copy)
    moved = sorted(rel for rel in again if again[rel] != after.get(rel))
    if moved or (match and match.group(1) != "0"):
        failures.append(f"second --fix changed {len(moved)} files ({match and match.group(1)} "
                        f"fixes): {moved[:10]}")
    for line in second.stderr.splitlines():
        if PROBLEMS.search(line) and "would break the file" not in line:
            failures.append(f"second --fix: {line}")

    report["failures"] = failures
    report["seconds"] = round(time.monotonic() - started, 1)
    if args.keep:
        report["kept"] = str(copy)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpora", nargs="+", help="folders, or names under --corpus-root")
    parser.add_argument("--corpus-root", type=Path, default=Path("/work/corpus"))
    parser.add_argument("--select", default="ALL", help="rules to run (default: ALL)")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--per-rule", action="store_true",
                        help="lint first, to count findings and fixable findings per rule")
    parser.add_argument("--check-diff", action="store_true",
                        help="also check that --diff announced exactly what --fix changed")
    parser.add_argument("--keep", action="store_true", help="keep the fixed copies")
    parser.add_argument("--json", type=Path, help="also write the reports to this file")
    args = parser.parse_args()

    reports = []
    for corpus in args.corpora:
        source = Path(corpus) if Path(corpus).is_dir() else args.corpus_root / corpus
        if not source.is_dir():
            print(f"{corpus}: not a folder", file=sys.stderr)
            return 2
        inside = source.resolve().is_relative_to(args.corpus_root.resolve())
        label = source.resolve().relative_to(args.corpus_root.resolve()) if inside else source.name
        name = re.sub(r"[^\w.-]", "_", str(label))
        report = sweep(name, source, args)
        reports.append(report)
        print(f"{name:28} {report['files']:6} files {report['lines']:8} lines  "
              f"{report['fixes_applied']!s:>5} fixes in {report['files_changed']:4} files  "
              f"{report['remaining']!s:>6} remaining ({report['syntax_errors']} PTL000)  "
              f"{len(report['failures'])} failures  {report['seconds']:7.1f}s", flush=True)
        for failure in report["failures"]:
            print(f"    FAIL {failure}", flush=True)
        if args.per_rule:
            print(f"    findings {report['findings']}\n    fixable  {report['fixable']}\n"
                  f"    remaining {report['remaining_by_rule']}", flush=True)
    total = {k: sum(r[k] or 0 for r in reports)
             for k in ("files", "lines", "fixes_applied", "files_changed", "remaining")}
    failures = sum(len(r["failures"]) for r in reports)
    print(f"{'TOTAL':28} {total['files']:6} files {total['lines']:8} lines  "
          f"{total['fixes_applied']:5} fixes in {total['files_changed']:4} files  "
          f"{total['remaining']:6} remaining  {failures} failures")
    if args.json:
        args.json.write_text(json.dumps(reports, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
