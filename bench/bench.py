#!/usr/bin/env python3
"""Benchmark ptlint against TorchFix and the LibCST parse floor on real code.

    python bench/bench.py /path/to/corpus [/path/to/other ...] [--runs 3] [--jobs 2]
                          [--small /path/to/repo ...] [--large /path/to/big/repository]
                          [--one-file FILE]

Both tools get exactly the same `.py` files (listed once, passed explicitly).
Runs alternate: ptlint cold (empty cache), ptlint warm (cache from the cold
run), the floor (LibCST parsing only the files ptlint has to parse, with the
same number of processes), the same with ptlint's own parse (LibCST's parser
without its per-node checks of the parser's output: what ptlint itself runs)
and TorchFix (installed from PyPI into its own
virtualenv by this script). `--small` does the same on a mix of small
repositories, all their files in one invocation, where start-up and per-file
costs weigh more than parsing. `--large` repeats ptlint cold, warm and the
floor on a repository of thousands of files, for the warm/cold ratio and
peak memory. The one-file series is the pre-commit case: one file, then five,
named on the command line, ptlint cold and warm against TorchFix and the floor
(one Python process that imports LibCST and parses them). Then the scaling
series: subsets of the corpus, synthetic single files of growing size, and
files with many fixes (one per line, or all on one generated line). Memory is
the whole process tree's (sum of PSS).

Every tool runs with Python's bytecode cache on (PYTHONDONTWRITEBYTECODE is
dropped from the environment, and one untimed run of ptlint writes it first),
as for an installed package. The tables are in the README's layout, ready to
paste; the last lines sum up the ratios the README quotes.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SKIP_DIRS = {".git", ".venv", "venv", "build", "dist", "__pycache__", "node_modules", "site-packages"}
# Installed packages have their bytecode compiled; so must ptlint's source checkout.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


@dataclass
class Sample:
    wall: float
    cpu: float
    memory_mb: float  # peak, all processes of the run together


@dataclass
class Series:
    name: str
    samples: list[Sample] = field(default_factory=list)

    def median(self, attr: str = "wall") -> float:
        return statistics.median(getattr(s, attr) for s in self.samples)

    def row(self, lines: int, torchfix: float | None, floor: float | None) -> str:
        walls = [s.wall for s in self.samples]
        med = self.median()
        cells = [
            self.name, f"{med:.2f}", f"{min(walls):.2f}", f"{max(walls):.2f}",
            f"{self.median('cpu'):.2f}", f"{max(s.memory_mb for s in self.samples):.0f}",
            f"{lines / med:,.0f}",
            *([f"{torchfix / med:.1f}x"] if torchfix else []),  # no column without TorchFix
            f"{med / floor:.2f}" if floor else "-",
        ]
        return "| " + " | ".join(cells) + " |"


def _tree_pss_mb(root: int) -> float:
    """Memory of `root` and all its descendants: the sum of their proportional
    set sizes (shared pages split between the processes that share them), MB."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as handle:
                    data = handle.read()
                ppid = int(data[data.rindex(b")") + 2:].split()[1])
            except (OSError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, ()))
        try:
            with open(f"/proc/{pid}/smaps_rollup") as handle:
                total += next(int(l.split()[1]) for l in handle if l.startswith("Pss:"))
        except (OSError, StopIteration, ValueError):
            pass
    return total / 1024


def measure(cmd: list[str], cwd: Path | None = None, env: dict | None = ENV) -> Sample:
    """Wall, CPU (user+sys of the process and its children) and peak memory of
    one run: the whole process tree's, sampled every 0.1 s where /proc allows,
    else the largest process's peak RSS."""
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=errors)
        peak = 0.0
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.1):
                peak = max(peak, _tree_pss_mb(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        if os.path.exists("/proc/self/smaps_rollup"):
            sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        done.set()
        if sampler.is_alive():
            sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in (0, 1):
            errors.seek(0)
            err = errors.read().decode(errors="replace")
            raise SystemExit(f"{cmd[0]} failed ({proc.returncode}):\n{err[-2000:]}")
    return Sample(wall, usage.ru_utime + usage.ru_stime, max(peak, usage.ru_maxrss / 1024))


def python_files(roots: list[Path]) -> list[Path]:
    out = []
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
            out.extend(Path(folder) / f for f in sorted(files) if f.endswith(".py"))
    return out


def count_lines(files: list[Path]) -> int:
    return sum(p.read_bytes().count(b"\n") for p in files)


def torchfix_bin() -> Path:
    venv = Path(os.environ.get("PTLINT_BENCH_TORCHFIX_VENV",
                               Path.home() / ".cache" / "ptlint-bench" / "torchfix"))
    exe = venv / "bin" / "torchfix"
    if not exe.exists():
        print(f"installing TorchFix into {venv} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "torchfix"], check=True)
    return exe


def ptlint_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "ptlint"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ptlint"]


FLOOR = r"""
import sys
from concurrent.futures import ProcessPoolExecutor
import libcst as cst
from ptlint.config import Settings, needed_codes, validate
from ptlint.engine.guard import parse as ptlint_parse
from ptlint.io.text import decode
PARSE = ptlint_parse if sys.argv[3] == "ptlint" else cst.parse_module

def parse(path):
    text = decode(open(path, "rb").read()).text
    if not needed_codes(text, CODES):
        return 0
    try:
        PARSE(text)
    except Exception:
        pass
    return 1

settings = Settings(); validate(settings)
settings.rules  # imported before the workers start, as ptlint does
CODES = settings.rule_codes
files = open(sys.argv[2]).read().split("\n")
with ProcessPoolExecutor(int(sys.argv[1])) as pool:
    parsed = sum(pool.map(parse, files, chunksize=8))
print(parsed, file=sys.stderr)
"""


def run_floor(jobs: int, listing: Path, parser: str = "libcst") -> Sample:
    """`parser`: "libcst" (`libcst.parse_module`: the floor) or "ptlint" (ptlint's
    own parse, which skips LibCST's per-node checks of the parser's output)."""
    return measure([sys.executable, "-c", FLOOR, str(jobs), str(listing), parser])


def synthetic(lines: int, source: str, dest: Path) -> Path:
    """A single file of about `lines` lines: `source` repeated, names made unique."""
    chunk = source.rstrip("\n") + "\n"
    per = chunk.count("\n")
    parts = []
    for i in range(max(1, lines // per)):
        parts.append(chunk.replace("def ", f"def v{i}_").replace("class ", f"class V{i}_"))
    dest.write_text("".join(parts))
    return dest


FINDING = "torch.zeros(2).cuda()"  # one PTL101 finding with a safe fix
FIX_SCALING = {  # layout -> (sizes, text of a file with n fixable findings)
    "one per line": ((1_000, 5_000, 20_000),
                     lambda n: "import torch\n" + "".join(f"x{i} = {FINDING}\n" for i in range(n))),
    "all on one line": ((5_000, 20_000, 50_000),
                        lambda n: "import torch\nx = [" + ", ".join([FINDING] * n) + "]\n"),
}


def fix_scaling(ptlint: list[str], work: Path, runs: int, sizes: dict | None = None) -> None:
    """Check and --fix of one file with n fixable findings, one per line or all
    on one (generated) line: both must grow about linearly with n."""
    print("| layout | findings | bytes | check s | --fix s | --fix µs per finding |")
    print("| --- | --- | --- | --- | --- | --- |")
    for layout, (default_sizes, make) in FIX_SCALING.items():
        for n in (sizes or {}).get(layout, default_sizes):
            text = make(n)
            path = work / f"fixes_{n}.py"
            path.write_text(text)
            check = statistics.median(
                measure([*ptlint, "--no-cache", "--jobs", "1", str(path)], cwd=work).wall
                for _ in range(max(1, runs // 2)))
            fixes = []
            for _ in range(max(1, runs // 2)):
                path.write_text(text)
                fixes.append(measure([*ptlint, "--no-cache", "--jobs", "1", "--fix", str(path)],
                                     cwd=work).wall)
            if path.read_text().count('device="cuda"') != n:
                raise SystemExit(f"--fix did not apply all {n} fixes ({layout})")
            fix = statistics.median(fixes)
            print(f"| {layout} | {n:,} | {len(text):,} | {check:.2f} | {fix:.2f} | "
                  f"{fix / n * 1e6:.0f} |")


def describe(label: str, roots: list[Path], files: list[Path], lines: int) -> None:
    print(f"{label}:")
    for root in roots:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        print(f"- {root}" + (f" @ {commit}" if commit else ""))
    print(f"\nfiles: {len(files)}, lines: {lines:,}\n")


FLOOR_ONE = r"""
import sys
import libcst as cst
if sys.argv[1] == "ptlint":
    from ptlint.engine.guard import parse
else:
    parse = cst.parse_module
for path in sys.argv[2:]:
    data = open(path, "rb").read()
    parse(data.decode("utf-8") if sys.argv[1] == "ptlint" else data)
"""


def run_floor_one(files: list[Path], parser: str = "libcst") -> Sample:
    """The floor of a run on a few files: one Python process that imports
    LibCST and parses them (`parser` as for `run_floor`)."""
    return measure([sys.executable, "-c", FLOOR_ONE, parser, *map(str, files)])


@dataclass
class Compared:
    label: str
    lines: int
    cold: Series
    warm: Series
    floor: Series
    torchfix: Series
    own_parse: Series = field(default_factory=lambda: Series("ptlint's parse"))

    def ratio(self, a: Series, b: Series) -> float | None:
        return a.median() / b.median() if a.samples and b.samples else None

    def table(self) -> list[str]:
        """The lines of the table, in the README's layout (no TorchFix column
        when TorchFix did not run)."""
        tf_med = self.torchfix.median() if self.torchfix.samples else None
        head = ["wall s", "min", "max", "CPU s", "peak MB", "lines/s", "TorchFix / this",
                "this / floor"]
        if tf_med is None:
            head.remove("TorchFix / this")
        lines = [f"| {self.label} | " + " | ".join(head) + " |", "|" + " --- |" * (len(head) + 1)]
        for series in (self.cold, self.warm, self.floor, self.own_parse, self.torchfix):
            if series.samples:
                lines.append(series.row(self.lines, tf_med, self.floor.median()))
        return lines


def compare(label: str, files: list[Path], lines: int, work: Path, ptlint: list[str], runs: int,
            jobs: int, torchfix: Path | None, tf_version: str = "",
            one_process_floor: bool = False) -> Compared:
    """Alternating runs of ptlint cold, ptlint warm, the floor and TorchFix on
    `files`; prints the table (in the README's layout) and returns the series.
    `one_process_floor`: the floor is one process (for a few files)."""
    listing = work / "files.txt"
    listing.write_text("\n".join(str(p) for p in files))
    names = [str(p) for p in files]
    cache = work / ".ptlint_cache"
    result = Compared(label, lines, Series("ptlint cold"), Series("ptlint warm"),
                      Series("parse floor"), Series(f"TorchFix {tf_version}".strip()))
    for run in range(runs):
        shutil.rmtree(cache, ignore_errors=True)
        result.cold.samples.append(measure([*ptlint, *names], cwd=work))
        result.warm.samples.append(measure([*ptlint, *names], cwd=work))
        for series, parser in ((result.floor, "libcst"), (result.own_parse, "ptlint")):
            series.samples.append(run_floor_one(files, parser) if one_process_floor
                                  else run_floor(jobs, listing, parser))
        if torchfix is not None:
            result.torchfix.samples.append(
                measure([str(torchfix), "-j", str(jobs), *names], cwd=work))
        print(f"{label}: run {run + 1}/{runs} done", file=sys.stderr)
    print("\n".join(result.table()))
    tf_med = result.torchfix.median() if result.torchfix.samples else None
    print(f"\nwarm run: {result.cold.median() / result.warm.median():.0f}x faster than cold "
          "(median wall)")
    if tf_med:
        print(f"cold run: {tf_med / result.cold.median():.1f}x faster than TorchFix, "
              f"{result.cold.median() / result.floor.median():.2f}x the parse floor, "
              f"{result.cold.median() / result.own_parse.median():.2f}x ptlint's own parse "
              "(median wall)")
    print("peak memory: all processes of a run together (sum of PSS), sampled every 0.1 s\n")
    return result


def one_file_choice(files: list[Path], count: int) -> list[Path]:
    """`count` files of median size among those that import torch (the files
    ptlint parses): what a pre-commit hook passes for a typical commit."""
    torch_files = sorted((p for p in files if b"import torch" in p.read_bytes()),
                         key=lambda p: (p.stat().st_size, str(p)))
    if not torch_files:
        return []
    middle = max(0, len(torch_files) // 2 - count // 2)
    return torch_files[middle:middle + count]


def summary(results: list[Compared]) -> None:
    """The ratios the README quotes, from this run."""
    print("## Summary (median wall)\n")
    for r in results:
        parts = []
        if r.torchfix.samples:
            parts.append(f"{r.ratio(r.torchfix, r.cold):.1f}x TorchFix")
        parts.append(f"{r.ratio(r.cold, r.floor):.2f}x the parse floor")
        parts.append(f"{r.ratio(r.cold, r.own_parse):.2f}x ptlint's own parse")
        parts.append(f"cold {r.cold.median():.2f} s, warm {r.warm.median():.2f} s "
                     f"({r.ratio(r.cold, r.warm):.0f}x faster)")
        parts.append(f"peak {max(s.memory_mb for s in r.cold.samples):.0f} MB")
        print(f"- {r.label}: " + "; ".join(parts))
    print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--small", nargs="+", type=Path, default=[],
                    help="small repositories, linted together in one invocation: where "
                         "start-up and per-file costs weigh most")
    ap.add_argument("--large", nargs="+", type=Path, default=[],
                    help="a repository of thousands of files: ptlint cold, warm and the floor "
                         "(no TorchFix), for the warm/cold ratio and peak memory")
    ap.add_argument("--one-file", nargs="+", type=Path, default=None, metavar="FILE",
                    help="the file of the one-file series (default: one of median size of "
                         "the corpus, and five for the five-file row)")
    ap.add_argument("--no-torchfix", action="store_true")
    ap.add_argument("--no-scaling", action="store_true")
    args = ap.parse_args()

    files = python_files(args.corpus)
    lines = count_lines(files)
    work = Path(tempfile.mkdtemp(prefix="ptlint-bench-"))
    ptlint = [*ptlint_cmd(), "check", "--output-format", "concise", "--exit-zero",
              "--jobs", str(args.jobs)]
    version = subprocess.run([*ptlint_cmd(), "--version"], capture_output=True, text=True).stdout.strip()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    tf = None if args.no_torchfix else torchfix_bin()
    tf_version = (subprocess.run([str(tf), "--version"], capture_output=True, text=True)
                  .stdout.strip() if tf else "")
    # Untimed: writes the bytecode of every module a run imports.
    measure([*ptlint, "--no-cache", *map(str, files[:50])], cwd=work)

    print("# ptlint benchmark\n")
    print(f"{version} @ {head}" + (f"; TorchFix {tf_version}" if tf else "") + "; default rules")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"jobs: {args.jobs}; runs: {args.runs}; load average at the start: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    results = []
    if args.small:
        small = python_files(args.small)
        small_lines = count_lines(small)
        print("## The small mix: small repositories in one invocation\n")
        describe("corpus", args.small, small, small_lines)
        results.append(compare("small mix", small, small_lines, work, ptlint, args.runs,
                               args.jobs, tf, tf_version))
    label = args.corpus[0].name if len(args.corpus) == 1 else "corpus"
    print(f"## {label}\n")
    describe("corpus", args.corpus, files, lines)
    results.append(compare(label, files, lines, work, ptlint, args.runs, args.jobs, tf, tf_version))
    if args.large:
        big = python_files(args.large)
        big_lines = count_lines(big)
        big_label = args.large[0].name if len(args.large) == 1 else "large"
        print(f"## {big_label}: a repository of thousands of files\n")
        describe("corpus", args.large, big, big_lines)
        results.append(compare(big_label, big, big_lines, work, ptlint, args.runs, args.jobs,
                               None))

    print("## One file, and five: the pre-commit case\n")
    print("The files named on the command line; the floor is one Python process that "
          "imports LibCST and parses them.\n")
    for count in (1, 5):
        chosen = (args.one_file[:count] if args.one_file else one_file_choice(files, count))
        if len(chosen) < count:
            continue
        n = count_lines(chosen)
        print("\n".join(f"- {p} ({p.stat().st_size:,} bytes)" for p in chosen) + "\n")
        results.append(compare(f"{count} file{'s' * (count > 1)}, {n:,} lines", chosen, n, work,
                               ptlint, max(args.runs, 5), args.jobs, tf, tf_version,
                               one_process_floor=True))

    if not args.no_scaling:
        print("\n## Scaling: subsets of the corpus (ptlint cold, no cache)\n")
        print("| share | files | lines | wall s | lines/s |")
        print("| --- | --- | --- | --- | --- |")
        for share in (0.25, 0.5, 1.0):
            subset = files[: max(1, int(len(files) * share))]
            n = count_lines(subset)
            t = statistics.median(measure([*ptlint, "--no-cache", *map(str, subset)], cwd=work).wall
                                  for _ in range(max(1, args.runs // 2)))
            print(f"| {share:.0%} | {len(subset)} | {n:,} | {t:.2f} | {n / t:,.0f} |")
        print("\n## Scaling: one synthetic file of growing size (ptlint, one process)\n")
        print("| lines | wall s | µs per line |")
        print("| --- | --- | --- |")
        seed = (ROOT / "fixtures").glob("PTL*/bad.py")
        source = "\n".join(p.read_text() for p in sorted(seed))
        empty = measure([*ptlint, "--no-cache", "--jobs", "1", str(synthetic(1, "x = 1\n", work / "tiny.py"))], cwd=work).wall
        for size in (1_000, 5_000, 20_000, 50_000):
            path = synthetic(size, source, work / f"synthetic_{size}.py")
            n = count_lines([path])
            t = statistics.median(
                measure([*ptlint, "--no-cache", "--jobs", "1", str(path)], cwd=work).wall
                for _ in range(max(1, args.runs // 2)))
            print(f"| {n:,} | {t:.2f} | {(t - empty) / n * 1e6:.0f} |")
        print(f"\n(start-up of one ptlint process on an empty file: {empty:.2f} s, subtracted per line)")
        print("\n## Scaling: fixes per file (ptlint, one process)\n")
        fix_scaling(ptlint, work, args.runs)
    print()
    summary(results)
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
