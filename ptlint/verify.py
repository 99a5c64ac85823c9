"""`ptlint verify`: the runtime companion. Run a rule's bad and fixed programs,
check what the fix changes, and time both.

Each version is a Python file defining `main(device="cpu")` that returns a dict
of results (tensors, numbers, lists of them). `ptlint verify` runs each version
in a process of its own, with a fixed seed and a time limit: on CPU a process
forked from a server that imported torch once (multiprocessing's forkserver);
on CUDA a fresh `python -m ptlint.verify --worker JOB`; under `torchrun` for
checks that need several processes. The worker calls `main()` once for the
results, again to measure memory (and for each value of a swept keyword), and
times it with `torch.utils.benchmark.Timer`. The parent then hands both results
to the rule's check.

Where the checks live: `runtime_checks/ptlNNN.py` in a source checkout, one
module per rule (see `Spec`). A rule with runnable fixtures but no such module
gets the default check: both versions return equal results.

Torch is imported only inside functions of this module and in the worker
subprocesses, never by the linter core.
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

if TYPE_CHECKING:  # `ptlint` builds its parser from this module: keep its import light
    import argparse
    from concurrent.futures import ThreadPoolExecutor
    from types import ModuleType

CODE = re.compile(r"^PTL\d{3}$", re.I)
DEFAULT_RTOL, DEFAULT_ATOL = 1e-5, 1e-6
NOISY = 0.25  # interquartile range / median above which a timing is flagged
MMAP_THRESHOLD = 65536  # glibc, when measuring memory: blocks from 64 KiB on via mmap


# -- what the checks see --------------------------------------------------------
@dataclass
class MemoryPoint:
    """One measured call of `main()`. Bytes are on the run's device: resident
    memory on CPU, `torch.cuda` allocator bytes on CUDA."""

    params: dict[str, Any]
    peak: int | None  # highest use during the call, above what was in use before it
    retained: int | None  # still in use after it returned (its result alive), gc'd
    graph_nodes: int  # autograd nodes reachable from the tensors it returned


@dataclass
class Timing:
    median: float  # seconds per call of main()
    iqr: float
    runs: int


@dataclass
class Version:
    """One program (bad, fixed or reference) as run by a worker."""

    label: str
    path: str
    device: str
    nproc: int = 1
    result: Any = None
    memory: list[MemoryPoint] = field(default_factory=list)
    timing: Timing | None = None
    error: str | None = None
    note: str | None = None  # e.g. why a sweep was skipped
    wall: float = 0.0

    @property
    def peak(self) -> int | None:
        return self.memory[0].peak if self.memory else None

    def sweep(self, name: str) -> list[tuple[Any, MemoryPoint]]:
        """(value, point) for each swept value of keyword `name`, in order."""
        return [(p.params[name], p) for p in self.memory if name in p.params]


@dataclass
class Spec:
    """A rule's runtime check, read from `runtime_checks/ptlNNN.py`.

    The module may define (all optional):
      COMPARED: str          what the check compares (shown in the table)
      compare(bad, fixed[, reference]) -> (passed: bool, detail: str)
                             default: both versions' results are equal
      SWEEP: {"steps": (8, 16, 32)}
                             call main(steps=...) with each value to measure memory
      NPROC: int             launch the fixed version with `torchrun --nproc_per_node=NPROC`
      reference(device="cpu") -> dict
                             a hand-written third version, run like the others
      note(device) -> str | None
                             a remark printed under the table
      CHANGES: {"key": "why"} the results the fix changes on purpose (an unsafe fix that
                             corrects a bug): each must differ, every other result must
                             stay equal
      CHANGES_RESULTS: bool  for `ptlint verify script.py`: the fix may change what
                             main() returns (it corrects a bug), so differing results
                             do not fail the check
    """

    code: str
    module: ModuleType | None = None
    path: Path | None = None

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self.module, name, default) if self.module is not None else default

    @property
    def compared(self) -> str:
        changes = self.get("CHANGES")
        if changes and not self.get("COMPARED"):
            return f"fix changes {', '.join(sorted(changes))}; the rest is equal"
        return self.get("COMPARED", "results of main() are equal")

    @property
    def sweep(self) -> dict[str, Sequence[Any]]:
        return dict(self.get("SWEEP", {}) or {})

    @property
    def nproc(self) -> int:
        return int(self.get("NPROC", 1))

    @property
    def has_reference(self) -> bool:
        return callable(self.get("reference"))

    @property
    def changes_results(self) -> bool:
        return bool(self.get("CHANGES_RESULTS", False))

    def note(self, device: str) -> str | None:
        note = self.get("note")
        return note(device) if callable(note) else note

    def compare(self, bad: Version, fixed: Version, reference: Version | None) -> tuple[bool, str]:
        compare = self.get("compare")
        if compare is None and self.get("CHANGES"):
            return compare_changes(bad, fixed, self.get("CHANGES"))
        if compare is None:
            return compare_equal(bad, fixed)
        if self.has_reference:
            return compare(bad, fixed, reference)
        return compare(bad, fixed)


@dataclass
class Check:
    """One row of the table: a bad/fixed pair and the spec that judges it."""

    code: str
    name: str
    source: str  # where the pair lives, for the reader
    bad: Path
    fixed: Path
    spec: Spec
    sys_path: tuple[str, ...] = ()
    codes_fixed: tuple[str, ...] = ()  # user scripts: the rules whose fixes were applied
    module_name: str = "ptlint_verify_target"


@dataclass
class Row:
    check: Check
    device: str
    passed: bool
    detail: str
    bad: Version
    fixed: Version
    reference: Version | None = None
    note: str | None = None

    @property
    def noisy(self) -> bool:
        """A spread above a quarter of the median: the ratio is not to be trusted."""
        return any(v.timing is not None and v.timing.iqr > NOISY * v.timing.median
                   for v in (self.bad, self.fixed))

    @property
    def ratio(self) -> float | None:
        if self.bad.timing and self.fixed.timing and self.fixed.timing.median > 0:
            return self.bad.timing.median / self.fixed.timing.median
        return None


# -- helpers for checks (torch imported lazily) ----------------------------------
def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "n/a"
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{sign}{n:.0f} {unit}" if unit == "B" else f"{sign}{n:.1f} {unit}"
        n /= 1024
    return f"{sign}{n:.1f} GiB"


def fmt_seconds(s: float | None) -> str:
    if s is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale or unit == "us":
            return f"{s / scale:.3g} {unit}"
    return f"{s:.3g} s"


def leaves(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(path, leaf) pairs of a nested dict/list/tuple, in a stable order."""
    if isinstance(tree, dict):
        out = []
        for key in sorted(tree, key=str):
            out += leaves(tree[key], f"{prefix}.{key}" if prefix else str(key))
        return out
    if isinstance(tree, (list, tuple)):
        out = []
        for i, item in enumerate(tree):
            out += leaves(item, f"{prefix}[{i}]")
        return out
    return [(prefix, tree)]


def flat(tree: Any):
    """All tensors and numbers of a result, flattened into one float64 vector."""
    import torch

    parts = []
    for _, leaf in leaves(tree):
        if isinstance(leaf, torch.Tensor):
            parts.append(leaf.detach().reshape(-1).to(torch.float64))
        elif isinstance(leaf, (int, float)) and not isinstance(leaf, bool):
            parts.append(torch.tensor([float(leaf)], dtype=torch.float64))
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def max_diff(a: Any, b: Any) -> tuple[float, str]:
    """The largest absolute difference between two results, and where it is.
    `inf` when their structure, shapes or non-numeric values differ."""
    import torch

    la, lb = leaves(a), leaves(b)
    if [p for p, _ in la] != [p for p, _ in lb]:
        return math.inf, "their keys or lengths differ"
    worst, where = 0.0, ""
    for (path, x), (_, y) in zip(la, lb):
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
                return math.inf, f"{path}: a tensor on one side only"
            if x.shape != y.shape:
                return math.inf, f"{path}: shapes {tuple(x.shape)} and {tuple(y.shape)}"
            if x.numel() == 0:
                continue
            x, y = x.detach().to(torch.float64), y.detach().to(torch.float64)
            finite = torch.isfinite(x) & torch.isfinite(y)
            same = (x == y) | (torch.isnan(x) & torch.isnan(y))  # inf == inf, nan ~ nan
            if not bool((finite | same).all()):
                return math.inf, f"{path}: inf or nan on one side only"
            d = (x[finite] - y[finite]).abs().max().item() if bool(finite.any()) else 0.0
        elif isinstance(x, (int, float)) and isinstance(y, (int, float)):
            d = 0.0 if float(x) == float(y) or (x != x and y != y) else abs(float(x) - float(y))
        else:
            d = 0.0 if x == y else math.inf
        if d != d:  # NaN
            d = math.inf
        if d > worst:
            worst, where = d, path
    return worst, where


def allclose(a: Any, b: Any, rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL) -> bool:
    import torch

    la, lb = leaves(a), leaves(b)
    if [p for p, _ in la] != [p for p, _ in lb]:
        return False
    for (_, x), (_, y) in zip(la, lb):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            if x.shape != y.shape or not torch.allclose(
                x.detach().to(torch.float64), y.detach().to(torch.float64), rtol=rtol, atol=atol,
                equal_nan=True,
            ):
                return False
        elif isinstance(x, (int, float)) and isinstance(y, (int, float)):
            both_nan = math.isnan(float(x)) and math.isnan(float(y))
            if not both_nan and not math.isclose(float(x), float(y), rel_tol=rtol, abs_tol=atol):
                return False
        elif isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor) or x != y:
            return False
    return True


def compare_equal(bad: Version, fixed: Version, rtol: float = DEFAULT_RTOL,
                  atol: float = DEFAULT_ATOL) -> tuple[bool, str]:
    """The default check: the fix keeps what main() returns."""
    if allclose(bad.result, fixed.result, rtol, atol):
        worst, _ = max_diff(bad.result, fixed.result)
        return True, f"results equal (max |diff| {worst:.2g}, rtol {rtol:g}, atol {atol:g})"
    worst, where = max_diff(bad.result, fixed.result)
    return False, f"results differ: {where} (max |diff| {worst:.3g})"


def compare_changes(bad: Version, fixed: Version, changes: dict[str, str],
                    rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL) -> tuple[bool, str]:
    """A fix that corrects a bug: the named results differ (the documented change),
    every other result is kept."""
    if not isinstance(bad.result, dict) or not isinstance(fixed.result, dict):
        return False, "main() must return a dict for a CHANGES check"
    if set(bad.result) != set(fixed.result):
        return False, "the two versions return different keys"
    missing = [k for k in changes if k not in bad.result]
    if missing:
        return False, f"main() returns no {', '.join(missing)}"
    same = [k for k in changes if allclose(bad.result[k], fixed.result[k], rtol, atol)]
    if same:
        return False, f"the documented change did not happen: {', '.join(same)} equal"
    kept = {k: v for k, v in bad.result.items() if k not in changes}
    if not allclose(kept, {k: fixed.result[k] for k in kept}, rtol, atol):
        _, where = max_diff(kept, {k: fixed.result[k] for k in kept})
        return False, f"an unrelated result changed: {where}"
    detail = "; ".join(f"{k} differs: {why}" for k, why in changes.items())
    return True, detail + (f"; {', '.join(sorted(kept))} equal" if kept else "")


def growth_per_step(points: list[tuple[Any, MemoryPoint]], attr: str = "retained") -> float | None:
    """Least-squares slope of a memory measure against the swept value."""
    pairs = [(float(v), float(getattr(p, attr))) for v, p in points if getattr(p, attr) is not None]
    if len(pairs) < 2:
        return None
    mx = sum(x for x, _ in pairs) / len(pairs)
    my = sum(y for _, y in pairs) / len(pairs)
    sxx = sum((x - mx) ** 2 for x, _ in pairs)
    return sum((x - mx) * (y - my) for x, y in pairs) / sxx if sxx else None


# -- finding checks -------------------------------------------------------------
def defines_main(path: Path) -> bool:
    import ast

    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "main"
               for n in tree.body)


def find_root(start: Path | None = None) -> Path | None:
    """The source checkout: the nearest folder (from cwd up, then the package's
    parent) holding both `fixtures/` and `runtime_checks/`."""
    here = (start or Path.cwd()).resolve()
    package_parent = Path(__file__).resolve().parent.parent
    for folder in [here, *here.parents, package_parent]:
        if (folder / "fixtures").is_dir() and (folder / "runtime_checks").is_dir():
            return folder
    return None


def load_spec(root: Path | None, code: str) -> Spec:
    import importlib.util

    if root is None:
        return Spec(code)
    path = root / "runtime_checks" / f"{code.lower()}.py"
    if not path.is_file():
        return Spec(code)
    module_name = f"ptlint_runtime_check_{code.lower()}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return Spec(code, module, path)


def rule_pairs(root: Path) -> dict[str, tuple[str, Path]]:
    """Code -> (name, folder) of every runnable bad/fixed pair: a fixture folder
    whose bad.py and fixed.py both define main(), unless the rule has a runtime
    program in runtime_checks/programs/<CODE>_<name>/ (a pair sized to show the
    consequence, e.g. memory that grows with the number of steps), which wins."""
    pairs: dict[str, tuple[str, Path]] = {}
    for parent in (root / "fixtures", root / "runtime_checks" / "programs"):  # programs win
        if not parent.is_dir():
            continue
        for folder in sorted(parent.iterdir()):
            match = re.match(r"(PTL\d{3})_(\w+)$", folder.name)
            if match and folder.is_dir() and _runnable(folder):
                pairs[match.group(1)] = (match.group(2).replace("_", "-"), folder)
    return dict(sorted(pairs.items()))


def _runnable(folder: Path) -> bool:
    return all((folder / n).is_file() and defines_main(folder / n) for n in ("bad.py", "fixed.py"))


class UsageError(Exception):
    """Something the user must change; exit 2."""


def _display(path: Path, root: Path | None) -> str:
    try:
        return str(path.resolve().relative_to((root or Path.cwd()).resolve()))
    except ValueError:
        return str(path)


def checks_for_rules(root: Path | None, codes: list[str]) -> list[Check]:
    if root is None:
        raise UsageError("no fixtures found: run `ptlint verify` inside a ptlint source "
                         "checkout, or pass a script that defines main(device)")
    pairs = rule_pairs(root)
    wanted = codes or list(pairs)
    checks = []
    for code in wanted:
        if code not in pairs:
            raise UsageError(f"{code} has no runnable bad/fixed pair (fixtures/{code}_*/bad.py "
                             "and fixed.py defining main(device))")
        name, folder = pairs[code]
        checks.append(Check(code, name, _display(folder, root),
                            folder / "bad.py", folder / "fixed.py", load_spec(root, code)))
    return checks


def check_for_script(path: Path, root: Path | None, workdir: Path) -> Check | None:
    """Fix a copy of the user's script (safe and unsafe fixes) in `workdir`.
    None when ptlint has nothing to fix in it. The script itself is only read."""
    from ptlint.config import find_config, load_config
    from ptlint.engine import fix_text, lint_text
    from ptlint.textio import decode

    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    if not defines_main(path):
        raise UsageError(f"{path}: defines no top-level main(device) to run")
    text = decode(path.read_bytes()).text
    settings = load_config(find_config(path))
    before = lint_text(text, str(path), settings)
    codes = sorted({f.code for f in before.findings if f.fix is not None
                    and settings.fix_allowed(f.code, f.fix.safety, unsafe=True)})
    fixed = fix_text(text, str(path), settings, unsafe=True)
    if fixed.text == text:
        return None
    copy = workdir / "fixed" / path.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(fixed.text, encoding="utf-8")
    specs = [load_spec(root, c) for c in codes]
    spec = ScriptSpec(",".join(codes), specs)
    stem = path.stem if path.stem.isidentifier() else "ptlint_verify_target"
    return Check(",".join(codes), path.name, _display(path, None), path, copy, spec,
                 sys_path=(str(path.resolve().parent),), codes_fixed=tuple(codes),
                 module_name=stem)


class ScriptSpec(Spec):
    """The check for a user's script: results equal, unless one of the applied
    fixes is documented to change them (it corrects a bug): then differing
    results are reported, not failed."""

    def __init__(self, code: str, specs: list[Spec]) -> None:
        super().__init__(code)
        self.specs = specs

    def _changing(self) -> list[str]:
        from ptlint.model import Safety
        from ptlint.rule import registry

        out = []
        for spec in self.specs:
            if spec.module is not None:
                if spec.changes_results:
                    out.append(spec.code)
            else:  # no spec at hand (an installed ptlint): trust the fix's safety
                rule = registry().get(spec.code)
                if rule is not None and rule.fix_safety is Safety.UNSAFE:
                    out.append(spec.code)
        return out

    @property
    def compared(self) -> str:
        return "results of main() before and after `ptlint --fix --unsafe-fixes`"

    def note(self, device: str) -> str | None:
        return None

    def compare(self, bad: Version, fixed: Version, reference: Version | None) -> tuple[bool, str]:
        passed, detail = compare_equal(bad, fixed)
        if passed:
            return passed, detail
        changing = self._changing()
        if changing:
            return True, (f"{detail}; expected, the fix of {', '.join(changing)} may change "
                          "results")
        return False, detail


# -- running the workers --------------------------------------------------------
@dataclass
class Options:
    device: str = "cpu"
    seed: int = 0
    timeout: float = 300.0
    min_time: float = 0.5
    timing: bool = True
    repeats: int = 5
    jobs: int = 1
    threads: int = 1
    fork: bool = True  # CPU versions forked from a server that imported torch once


def _worker_env(device: str, seed: int, threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # never leave __pycache__ next to a user's script
    env["PYTHONHASHSEED"] = str(seed)
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # cpu means cpu, even on a GPU machine
    env["OMP_NUM_THREADS"] = str(threads)  # per process; torchrun would warn and pick 1
    quiet = "ignore:Failed to initialize NumPy"  # torch without numpy says so on import
    env["PYTHONWARNINGS"] = ",".join(w for w in (env.get("PYTHONWARNINGS"), quiet) if w)
    # the worker imports ptlint from wherever this process did
    package_parent = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    return env


def run_version(label: str, path: Path, function: str, check: Check, device: str,
                nproc: int, opts: Options, workdir: Path) -> Version:
    """Run one version. On CPU in one process, results and memory (glibc's mmap
    threshold fixed, so resident memory follows what tensors hold), then in a
    second process the timing (glibc as usual: a fixed threshold would make every
    large allocation a system call). CUDA memory comes from torch's allocator and
    torchrun is launched once, so there one process does all three."""
    tag = f"{check.code.replace(',', '_')}_{label}"
    base = {
        "file": str(path.resolve()), "function": function, "module": check.module_name,
        "device": device, "seed": opts.seed, "sweep": check.spec.sweep if label != "reference"
        else {}, "min_time": opts.min_time, "repeats": opts.repeats,
        "sys_path": list(check.sys_path), "result": str(workdir / f"{tag}.pt"),
        "threads": opts.threads,
    }
    if device == "cpu" and nproc == 1:
        runs = [("measure", {"results": True, "timing": False, "fix_mmap": True})]
        if opts.timing:
            runs.append(("time", {"results": False, "timing": True, "fix_mmap": False}))
    else:
        runs = [("all", {"results": True, "timing": opts.timing, "fix_mmap": False})]
    version = Version(label, str(path), device, nproc)
    start = time.perf_counter()
    try:
        for name, phases in runs:
            metrics = _launch({**base, **phases, "metrics": str(workdir / f"{tag}.{name}.json")},
                              workdir / f"{tag}.{name}", device, nproc, opts)
            if phases["results"]:
                version.memory = [MemoryPoint(**p) for p in metrics["memory"]]
                version.note = metrics.get("note")
            if metrics.get("timing"):
                version.timing = Timing(**metrics["timing"])
    except _RunError as exc:
        version.error = str(exc)
        return version
    finally:
        version.wall = time.perf_counter() - start
    import torch

    version.result = torch.load(base["result"], weights_only=True)
    return version


# What multiprocessing reports when the fork server could not say how a process
# ended (its status pipe closed early): the run is retried in a fresh interpreter.
_LOST = 255


class _RunError(Exception):
    """A version crashed, failed or ran out of time; the message says how."""


def _launch(job: dict, stem: Path, device: str, nproc: int, opts: Options) -> dict:
    job_path = stem.with_name(f"{stem.name}.job.json")
    job_path.write_text(json.dumps(job), encoding="utf-8")
    metrics_path = Path(job["metrics"])
    worker_args = ["-m", "ptlint.verify", "--worker", str(job_path)]
    if nproc > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc_per_node={nproc}", "--monitor-interval=0.1", *worker_args]
    else:
        cmd = [sys.executable, *worker_args]
    status: int | None = _LOST
    if nproc == 1 and device == "cpu" and opts.fork:
        status, output = _run_forked(job_path, stem.with_name(f"{stem.name}.log"), opts)
        if status == _LOST and metrics_path.is_file():
            status = 0  # it finished and wrote its metrics; only its exit status was lost
    for attempt in range(2):
        if status != _LOST:
            break
        # Not forked, or the fork server lost the run; and once more after a crash
        # of the machinery rather than of the program (a process killed by a
        # signal, or torchrun reporting one): such crashes come from the machine.
        metrics_path.unlink(missing_ok=True)
        status, output = _run_subprocess(cmd, _worker_env(device, opts.seed, opts.threads),
                                         job_path.parent, opts.timeout)
        if attempt == 0 and status is not None and not metrics_path.is_file() and (
                status < 0 or (nproc > 1 and re.search(r"Signal \d+ \(SIG\w+\) received", output))):
            status = _LOST
    if status is None:
        raise _RunError(f"timed out after {opts.timeout:g} s")
    metrics = json.loads(metrics_path.read_text(encoding="utf-8")) if metrics_path.is_file() else {}
    if not metrics.get("error"):  # a rank other than 0 may have failed
        for other in sorted(metrics_path.parent.glob(f"{metrics_path.stem}.rank*.json")):
            metrics = json.loads(other.read_text(encoding="utf-8"))
            break
    if metrics.get("error"):
        raise _RunError(metrics["error"].rstrip())
    if status != 0 or not metrics:
        tail = "\n".join(output.strip().splitlines()[-15:])
        raise _RunError(f"exit status {status}\n{tail}")
    return metrics


def _run_subprocess(cmd: list[str], env: dict[str, str], workdir: Path,
                    timeout: float) -> tuple[int | None, str]:
    """Run a fresh interpreter (or torchrun); (exit status or None on timeout, output)."""
    import subprocess

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True, cwd=str(workdir))
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        output, _ = proc.communicate()
        return None, output.decode("utf-8", "replace")
    return proc.returncode, output.decode("utf-8", "replace")


def _kill_group(pid: int) -> None:
    import signal

    try:
        os.killpg(pid, signal.SIGKILL)  # the worker's own session: it and its children
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# CPU versions are forked from a server that imported torch once (multiprocessing's
# forkserver): each still runs in a process of its own, without paying for the
# import (seconds) every time. CUDA and torchrun versions start fresh interpreters.
_FORK_CONTEXT: Any = None


def fork_available() -> bool:
    import multiprocessing

    return sys.platform.startswith("linux") and "forkserver" in \
        multiprocessing.get_all_start_methods()


def _fork_context(threads: int) -> Any:
    """Start the fork server (once). Call it before starting threads: it swaps
    os.environ for a moment."""
    global _FORK_CONTEXT
    if _FORK_CONTEXT is None:
        import multiprocessing
        from multiprocessing import forkserver

        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["torch", "torch._dynamo", "ptlint.verify"])
        saved = dict(os.environ)
        try:  # the server's environment is what its children start with
            os.environ.update(_worker_env("cpu", 0, threads))
            forkserver.ensure_running()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        _FORK_CONTEXT = context
    return _FORK_CONTEXT


def _run_forked(job_path: Path, log: Path, opts: Options) -> tuple[int | None, str]:
    process = _fork_context(opts.threads).Process(
        target=_forked_worker, args=(str(job_path), str(log)))  # not daemonic: main() may fork
    process.start()
    process.join(opts.timeout)
    if process.is_alive():
        _kill_group(process.pid)
        process.join()
        status = None
    else:
        status = process.exitcode
    output = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    return status, output


def _forked_worker(job_path: str, log: str) -> None:
    os.setsid()  # its own process group, so a timeout takes its children too
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.chdir(str(Path(job_path).parent))
    code = worker(job_path)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip the interpreter's teardown: nothing more to write


@dataclass
class _Pending:
    check: Check
    device: str
    nproc: int
    note: str | None
    futures: list  # bad, fixed[, reference]


def plan_check(check: Check, opts: Options) -> _Pending:
    """Where the check runs: a check that needs more GPUs than there are runs on CPU."""
    device, note, nproc = opts.device, None, check.spec.nproc
    if nproc > 1 and device.startswith("cuda"):
        import torch

        if torch.cuda.device_count() < nproc:
            device = "cpu"
            note = (f"needs {nproc} GPUs for NCCL, {torch.cuda.device_count()} found, so it "
                    "ran on CPU with gloo")
    return _Pending(check, device, nproc, note, [])


def start_check(pending: _Pending, opts: Options, workdir: Path,
                pool: ThreadPoolExecutor) -> _Pending:
    check, device, nproc = pending.check, pending.device, pending.nproc
    pending.futures = [
        pool.submit(run_version, "bad", check.bad, "main", check, device, 1, opts, workdir),
        pool.submit(run_version, "fixed", check.fixed, "main", check, device, nproc, opts,
                    workdir),
    ]
    if check.spec.has_reference:
        pending.futures.append(pool.submit(run_version, "reference", check.spec.path,
                                           "reference", check, device, 1, opts, workdir))
    return pending


def finish_check(pending: _Pending) -> Row:
    check, device, nproc = pending.check, pending.device, pending.nproc
    versions = [f.result() for f in pending.futures]
    b, f = versions[0], versions[1]
    r = versions[2] if len(versions) > 2 else None
    errors = [(v.label, v.error) for v in versions if v.error]
    if errors:
        passed = False
        detail = "; ".join(f"{label} failed: {error.strip().splitlines()[-1]}"
                           for label, error in errors)
    else:
        try:
            passed, detail = check.spec.compare(b, f, r)
        except Exception as exc:  # noqa: BLE001 - a broken check is a failed check
            passed = False
            where = check.spec.path.name if check.spec.path else "the check"
            detail = (f"the check raised {type(exc).__name__}: {exc} (does main() return "
                      f"what {where} expects?)")
    notes = [n for n in (pending.note, check.spec.note(device), b.note, f.note) if n]
    if nproc > 1 and not errors:
        notes.append(f"the fixed version was launched with `torchrun --nproc_per_node={nproc}`"
                     "; its time and memory are rank 0's")
    return Row(check, device, bool(passed), detail, b, f, r,
               f"{check.code}: " + "; ".join(notes) if notes else None)


# -- output ---------------------------------------------------------------------
def _time_cell(v: Version) -> str:
    if v.error:
        return "error"
    if v.timing is None:
        return "-"
    return f"{fmt_seconds(v.timing.median)} ±{fmt_seconds(v.timing.iqr / 2)}"


def render_table(rows: list[Row], header: str) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=False, highlight=False,
                      width=None if sys.stdout.isatty() else 150)
    table = Table(title=header, header_style="bold", title_justify="left")
    for column, kw in (("rule", {"no_wrap": True}), ("device", {"no_wrap": True}),
                       ("check", {"no_wrap": True}), ("what was compared", {"ratio": 1}),
                       ("bad time", {"justify": "right", "no_wrap": True}),
                       ("fixed time", {"justify": "right", "no_wrap": True}),
                       ("ratio", {"justify": "right", "no_wrap": True}),
                       ("bad peak", {"justify": "right", "no_wrap": True}),
                       ("fixed peak", {"justify": "right", "no_wrap": True})):
        table.add_column(column, overflow="fold", **kw)
    for row in rows:
        ratio = row.ratio
        device = row.device if row.fixed.nproc == 1 else f"{row.device}, fixed x{row.fixed.nproc}"
        table.add_row(
            row.check.code, device,
            "[green]passed[/]" if row.passed else "[bold red]FAILED[/]",
            row.check.spec.compared,
            _time_cell(row.bad), _time_cell(row.fixed),
            "-" if ratio is None else f"{ratio:.2f}x" + ("?" if row.noisy else ""),
            "error" if row.bad.error else fmt_bytes(row.bad.peak),
            "error" if row.fixed.error else fmt_bytes(row.fixed.peak),
        )
    console.print(table)
    for row in rows:
        status = "passed" if row.passed else "FAILED"
        console.print(f"{row.check.code} {row.check.name} {status}: {row.detail}", markup=False)
        if row.note:
            console.print(f"  note: {row.note}", markup=False)
        for v in (row.bad, row.fixed, row.reference):
            if v is not None and v.error:
                console.print(f"  {v.label} ({v.path}):\n{v.error}", markup=False)
    failed = sum(not r.passed for r in rows)
    console.print(f"{len(rows) - failed} passed, {failed} failed. Time: median ± half the "
                  "interquartile range of main() calls; ratio: bad time / fixed time (above 1: "
                  "the fix is faster); peak: memory use above the start of the call (CPU: "
                  "resident set, CUDA: allocator).", markup=False)
    if any(r.noisy for r in rows):
        console.print(f"?: noisy timing (interquartile range above {NOISY:.0%} of the median):"
                      " the machine is busy; trust the ratio less, or rerun with a larger "
                      "--min-time.", markup=False)


def _version_json(v: Version | None) -> dict | None:
    if v is None:
        return None
    return {
        "path": v.path, "device": v.device, "processes": v.nproc, "error": v.error,
        "wall_s": round(v.wall, 3),
        "time": asdict(v.timing) if v.timing else None,
        "peak_bytes": v.peak,
        "memory": [asdict(p) for p in v.memory],
        "note": v.note,
    }


def render_json(rows: list[Row], info: dict) -> str:
    return json.dumps({
        **info,
        "passed": all(r.passed for r in rows),
        "checks": [{
            "rule": r.check.code, "name": r.check.name, "source": r.check.source,
            "device": r.device, "passed": r.passed, "compared": r.check.spec.compared,
            "detail": r.detail, "ratio": r.ratio, "noisy_timing": r.noisy, "note": r.note,
            "bad": _version_json(r.bad), "fixed": _version_json(r.fixed),
            "reference": _version_json(r.reference),
        } for r in rows],
    }, indent=2)


# -- the command ----------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("targets", nargs="*", metavar="RULE|SCRIPT",
                        help="rule codes (default: every rule with runnable fixtures) or "
                             "Python files that define main(device)")
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu",
                        help="where main() runs (auto: CUDA when available)")
    parser.add_argument("--output-format", choices=("full", "json"), default="full")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed for torch, random (and numpy) before every call of main()")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                        help="time limit for each version's process")
    parser.add_argument("--min-time", type=float, default=0.5, metavar="SECONDS",
                        help="how long to time each version (blocked autorange)")
    parser.add_argument("--no-timing", dest="timing", action="store_false",
                        help="check results and memory only")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads per process (default 1, as torch.utils.benchmark)")
    parser.add_argument("-j", "--jobs", type=int, default=1,
                        help="versions run at once (default 1: timings stay honest)")
    parser.add_argument("--no-fork", dest="fork", action="store_false",
                        help="start every version in a fresh interpreter (slower: torch is "
                             "imported each time) instead of forking it from a server that "
                             "imported torch once")
    parser.add_argument("--root", type=Path, help="the ptlint checkout holding fixtures/ "
                        "and runtime_checks/ (default: found from the current folder)")


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(args: argparse.Namespace) -> int:
    import tempfile
    import warnings
    from concurrent.futures import ThreadPoolExecutor

    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    try:
        import torch
    except ImportError:
        return _error("`ptlint verify` runs PyTorch programs and needs torch: "
                      "pip install 'ptlint[runtime]' (or torch)")

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device == "cuda" and not torch.cuda.is_available():
        return _error("--device cuda: CUDA is not available (torch "
                      f"{torch.__version__}); use --device cpu or auto")
    opts = Options(device=device, seed=args.seed, timeout=args.timeout, min_time=args.min_time,
                   timing=args.timing, jobs=max(1, args.jobs), threads=max(1, args.threads),
                   fork=args.fork and fork_available())
    root = args.root.resolve() if args.root else find_root()
    if args.root and not (root / "fixtures").is_dir():
        return _error(f"--root {args.root}: no fixtures/ folder there")
    codes = [t.upper() for t in args.targets if CODE.match(t) and not Path(t).exists()]
    scripts = [Path(t) for t in args.targets if t.upper() not in codes]
    with tempfile.TemporaryDirectory(prefix="ptlint-verify-") as tmp:
        workdir = Path(tmp)
        try:
            checks = checks_for_rules(root, codes) if codes or not scripts else []
            nothing = []
            for script in scripts:
                check = check_for_script(script, root, workdir)
                if check is None:
                    nothing.append(str(script))
                else:
                    checks.append(check)
        except UsageError as exc:
            return _error(str(exc))
        for script in nothing:
            print(f"{script}: ptlint has nothing to fix, so there is nothing to verify",
                  file=sys.stderr)
        if not checks:
            return 0 if nothing else _error("no runnable bad/fixed pairs found")
        plans = [plan_check(check, opts) for check in checks]
        if opts.fork and any(p.device == "cpu" for p in plans):
            _fork_context(opts.threads)  # before any thread: it briefly swaps os.environ
        with ThreadPoolExecutor(max_workers=opts.jobs) as pool:
            pending = [start_check(p, opts, workdir, pool) for p in plans]
            rows = [finish_check(p) for p in pending]
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else None
    info = {"torch": torch.__version__, "device": device, "gpu": gpu, "seed": opts.seed,
            "threads": opts.threads, "python": sys.version.split()[0]}
    if args.output_format == "json":
        print(render_json(rows, info))
    else:
        where = f"cuda ({gpu})" if gpu else device
        render_table(rows, f"ptlint verify: torch {torch.__version__}, {where}, seed {opts.seed}, "
                           f"{opts.threads} thread{'s' * (opts.threads != 1)} per process")
    return 0 if all(r.passed for r in rows) else 1


# -- the worker: runs in its own process (or one per rank under torchrun) ----------
def _seed(seed: int) -> None:
    import random

    import torch

    random.seed(seed)
    torch.manual_seed(seed)  # every device's generator
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(seed)


def _rss() -> int | None:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _max_rss() -> int:
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _reset_peak_rss() -> bool:
    """Linux: make the peak RSS start again from the current RSS."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _fix_mmap_threshold() -> None:
    """glibc: serve blocks from 64 KiB up with mmap and never raise that bound, so
    freed tensors go back to the OS and resident memory follows what is held."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(-3, MMAP_THRESHOLD)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def _graph_nodes(result: Any) -> int:
    import torch

    seen: dict[int, Any] = {}
    stack = [leaf.grad_fn for _, leaf in leaves(result)
             if isinstance(leaf, torch.Tensor) and leaf.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node  # hold it, so ids stay unique
        stack.extend(n for n, _ in getattr(node, "next_functions", ()))
    return len(seen)


def _to_cpu(result: Any) -> Any:
    import torch

    if isinstance(result, torch.Tensor):
        return result.detach().cpu()
    if isinstance(result, dict):
        return {str(k): _to_cpu(v) for k, v in result.items()}
    if isinstance(result, (list, tuple)):
        return [_to_cpu(v) for v in result]
    if isinstance(result, torch.Size):
        return list(result)
    if result is None or isinstance(result, (bool, int, float, str)):
        return result
    if hasattr(result, "item") and callable(result.item):  # numpy scalars
        return result.item()
    return repr(result)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def _measure(fn: Callable, params: dict, device: str, seed: int) -> dict:
    import gc

    import torch

    cuda = device.startswith("cuda")
    gc.collect()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        reset = True
    else:
        base = _rss()
        reset = _reset_peak_rss()
        before_peak = _max_rss()
    _seed(seed)
    result = fn(device, **params)
    _sync(device)
    gc.collect()
    if cuda:
        peak = torch.cuda.max_memory_allocated() - base
        retained = torch.cuda.memory_allocated() - base
    else:
        now = _rss()
        retained = now - base if now is not None and base is not None else None
        after_peak = _max_rss()
        if base is None:
            peak = None
        elif reset or after_peak > before_peak:
            peak = max(0, after_peak - base)
        else:
            peak = None  # the old high-water mark hides this call's peak
    nodes = _graph_nodes(result)
    del result
    return {"params": params, "peak": peak, "retained": retained, "graph_nodes": nodes}


def _time(fn: Callable, device: str, min_time: float, repeats: int, threads: int) -> dict:
    import statistics

    import torch
    from torch.utils.benchmark import Timer

    timer = Timer(stmt="fn(device)", globals={"fn": fn, "device": device},
                  num_threads=threads)  # and it synchronises CUDA itself
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # every rank must call main() equally often: no adaptive block sizes
        times = [timer.timeit(number=1).median for _ in range(repeats)]
        q = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
        return {"median": statistics.median(times), "iqr": q[2] - q[0], "runs": len(times)}
    m = timer.blocked_autorange(min_run_time=min_time)
    return {"median": m.median, "iqr": m.iqr, "runs": len(m.times) * m.number_per_run}


def _load_function(path: str, function: str, module_name: str) -> Callable:
    import importlib.util

    if module_name in sys.modules:  # a script named like a module already imported
        module_name = "ptlint_verify_target"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    fn = getattr(module, function, None)
    if not callable(fn):
        raise AttributeError(f"{path} defines no {function}()")
    return fn


def _sweep_points(fn: Callable, sweep: dict) -> tuple[list[dict], str | None]:
    import inspect

    if not sweep:
        return [], None
    params = inspect.signature(fn).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    missing = [k for k in sweep if k not in params and not takes_any]
    if missing:
        return [], f"main() takes no `{missing[0]}`, so memory was measured once"
    points: list[dict] = []
    for name, values in sweep.items():
        points += [{name: v} for v in values]
    return points, None


def worker(job_path: str) -> int:
    import traceback
    import warnings

    sys.dont_write_bytecode = True
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    if job["fix_mmap"]:
        _fix_mmap_threshold()
    rank = int(os.environ.get("RANK", "0"))
    metrics: dict[str, Any] = {}
    import torch

    torch.set_num_threads(job["threads"])
    try:
        for entry in reversed(job["sys_path"]):
            sys.path.insert(0, entry)
        fn = _load_function(job["file"], job["function"], job["module"])
        device, seed = job["device"], job["seed"]
        metrics = {"error": None}
        if job["results"]:
            _seed(seed)
            result = fn(device)  # the results compared; also the warm-up
            _sync(device)
            saved = _to_cpu(result)
            del result
            points, note = _sweep_points(fn, job["sweep"])
            metrics["memory"] = [_measure(fn, p, device, seed) for p in [{}, *points]]
            metrics["note"] = note
            if rank == 0:
                torch.save(saved, job["result"])
        if job["timing"]:  # Timer warms up itself
            _seed(seed)
            metrics["timing"] = _time(fn, device, job["min_time"], job["repeats"],
                                      job["threads"])
    except BaseException:  # noqa: BLE001 - report whatever main() raised
        metrics = {"error": traceback.format_exc()}
    finally:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            try:
                torch.distributed.destroy_process_group()
            except Exception:  # noqa: BLE001
                pass
    if rank == 0 or metrics.get("error"):
        path = Path(job["metrics"])
        if rank != 0:
            path = path.with_name(f"{path.stem}.rank{rank}.json")
        path.write_text(json.dumps(metrics), encoding="utf-8")
    return 1 if metrics.get("error") else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        sys.exit(worker(sys.argv[2]))
    sys.exit("usage: python -m ptlint.verify --worker JOB.json (use `ptlint verify`)")
