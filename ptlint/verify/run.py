"""Running each version in a process of its own and collecting a row per check."""
from __future__ import annotations

import json
import os
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ptlint.verify.compare import fmt_seconds
from ptlint.verify.model import Check, MemoryPoint, Row, Speed, Timing, Version
from ptlint.verify.timing import describe, speed
from ptlint.verify.worker import worker

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

PACKAGE_PARENT = Path(__file__).resolve().parent.parent.parent  # where `ptlint` imports from


@dataclass
class Options:
    device: str = "cpu"
    seed: int = 0
    timeout: float = 300.0
    min_time: float = 0.5
    timing: bool = True
    repeats: int = 5
    rounds: int = 5  # interleaved timing rounds (bad, fixed, bad, fixed, ...)
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
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PACKAGE_PARENT), env.get("PYTHONPATH")) if p)
    return env


def run_version(label: str, path: Path, function: str, check: Check, device: str,
                nproc: int, opts: Options, workdir: Path, timing: bool = False) -> Version:
    """Run one version. On CPU in one process, results and memory (glibc's mmap
    threshold fixed, so resident memory follows what tensors hold), then in a
    second process the timing (glibc as usual: a fixed threshold would make every
    large allocation a system call). CUDA memory comes from torch's allocator and
    torchrun is launched once, so there one process does all three. `timing`:
    time it here too (a check launched under torchrun); else `time_pair` times it
    against its counterpart."""
    tag = f"{check.code.replace(',', '_')}_{label}" + (f"_x{nproc}" if nproc > 1 else "")
    base = {
        "file": str(path.resolve()), "function": function, "module": check.module_name,
        "device": device, "seed": opts.seed, "sweep": check.spec.sweep if label != "reference"
        else {}, "min_time": opts.min_time, "repeats": opts.repeats,
        "sys_path": list(check.sys_path), "result": str(workdir / f"{tag}.pt"),
        "threads": opts.threads, "pair": None,
    }
    if device == "cpu" and nproc == 1:
        runs = [("measure", {"results": True, "timing": False, "fix_mmap": True})]
        if timing:
            runs.append(("time", {"results": False, "timing": True, "fix_mmap": False}))
    else:
        runs = [("all", {"results": True, "timing": timing, "fix_mmap": False})]
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
    worker_args = ["-m", "ptlint.verify.worker", str(job_path)]
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
        # (also when the metrics were written and a process was then killed on its
        # way out: torchrun's gloo ranks sometimes abort at shutdown under load)
        if attempt == 0 and status is not None and not _reported_error(metrics_path) and (
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


def _reported_error(metrics_path: Path) -> bool:
    """Whether the run wrote metrics that report an error of the program itself."""
    try:
        return bool(json.loads(metrics_path.read_text(encoding="utf-8")).get("error"))
    except (OSError, ValueError, AttributeError):
        return False


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


def fork_context(threads: int) -> Any:
    """Start the fork server (once). Call it before starting threads: it swaps
    os.environ for a moment."""
    global _FORK_CONTEXT
    if _FORK_CONTEXT is None:
        import multiprocessing
        from multiprocessing import forkserver

        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["torch", "torch._dynamo", "ptlint.verify.worker"])
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
    process = fork_context(opts.threads).Process(
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
    launches: tuple[int, ...]  # process counts of the fixed version, one row each
    note: str | None
    futures: list  # bad, fixed (one per launch)[, reference]
    folder: Path | None = None  # where its versions run (set by start_check)


def plan_check(check: Check, opts: Options) -> _Pending:
    """Where the check runs: a check that needs more GPUs than there are runs on CPU."""
    device, note, launches = opts.device, None, check.spec.launches
    most = max(launches)
    if most > 1 and device.startswith("cuda"):
        import torch

        if torch.cuda.device_count() < most:
            device = "cpu"
            note = (f"needs {most} GPUs for NCCL, {torch.cuda.device_count()} found, so it "
                    "ran on CPU with gloo")
    return _Pending(check, device, launches, note, [])


def _after(first, run, *args) -> Version:
    """`run(*args)` once `first` (a future) has finished, whatever its outcome."""
    first.exception()
    return run(*args)


def start_check(pending: _Pending, opts: Options, workdir: Path,
                pool: ThreadPoolExecutor) -> _Pending:
    """Submit the check's versions. They run in a folder of the check's own (their
    working directory); the pool takes tasks in order, so a fixed version waiting
    for bad never waits for a task behind it. A version launched under torchrun
    (and the original it is judged against) times itself; the others are timed
    in pairs by `finish_check`."""
    check, device = pending.check, pending.device
    folder = workdir / check.code.replace(",", "_")
    folder.mkdir(parents=True, exist_ok=True)
    pending.folder = folder
    apart = opts.timing and max(pending.launches) > 1
    bad = pool.submit(run_version, "bad", check.bad, "main", check, device, 1, opts, folder,
                      apart)
    pending.futures = [bad]
    for nproc in pending.launches:
        args = ("fixed", check.fixed, "main", check, device, nproc, opts, folder,
                opts.timing and nproc > 1)
        pending.futures.append(pool.submit(_after, bad, run_version, *args)
                               if check.spec.reads_bad_files else pool.submit(run_version, *args))
    if check.spec.has_reference:
        pending.futures.append(pool.submit(run_version, "reference", check.spec.path,
                                           "reference", check, device, 1, opts, folder))
    return pending


def time_pair(check: Check, bad: Version, fixed: Version, device: str, opts: Options,
              workdir: Path) -> Speed | None:
    """Time bad and fixed in one process, in interleaved rounds (bad, fixed, then
    fixed, bad, ...: the machine's drift touches both alike); set each version's
    timing and return the ratio with its confidence interval."""
    tag = f"{check.code.replace(',', '_')}_pair"
    job = {
        "pair": [{"file": str(Path(v.path).resolve()), "module": f"{check.module_name}_{v.label}"}
                 for v in (bad, fixed)],
        "device": device, "seed": opts.seed, "min_time": opts.min_time, "rounds": opts.rounds,
        "sys_path": list(check.sys_path), "threads": opts.threads, "fix_mmap": False,
        "metrics": str(workdir / f"{tag}.json"),
    }
    try:
        metrics = _launch(job, workdir / tag, device, 1, opts)
    except _RunError as exc:
        bad.note = "; ".join(n for n in (bad.note, f"timing failed: {exc}") if n)
        return None
    for version, samples in zip((bad, fixed), zip(*metrics["rounds"])):
        version.timing = timing_of(list(samples))
    return speed([r[0] for r in metrics["rounds"]], [r[1] for r in metrics["rounds"]])


def timing_of(samples: list[float]) -> Timing:
    import statistics

    q = statistics.quantiles(samples, n=4) if len(samples) > 1 else [samples[0]] * 3
    return Timing(statistics.median(samples), q[2] - q[0], len(samples), samples)


def finish_check(pending: _Pending, opts: Options | None = None) -> list[Row]:
    """A row per launch of the fixed version, each judged against the same bad run.
    With `opts` (and timing on), a fixed version in one process is timed in
    interleaved rounds against the original (a copy of it, for its row)."""
    check, device = pending.check, pending.device
    versions = [f.result() for f in pending.futures]
    b = versions[0]
    fixed = versions[1:1 + len(pending.launches)]
    r = versions[-1] if check.spec.has_reference else None
    rows = []
    for f in fixed:
        bad, pair = b, None
        if opts is not None and opts.timing and f.nproc == 1 and pending.folder is not None \
                and not (b.error or f.error):
            bad = replace(b)  # this row's timing of the original; the shared run keeps its own
            pair = time_pair(check, bad, f, device, opts, pending.folder)
        rows.append(_row(check, device, pending.note, bad, f, r, pair))
    return rows


def _row(check: Check, device: str, plan_note: str | None, b: Version, f: Version,
         r: Version | None, pair: Speed | None = None) -> Row:
    errors = [(v.label, v.error) for v in (b, f, r) if v is not None and v.error]
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
    notes = [n for n in (plan_note, check.spec.note(device), b.note, f.note) if n]
    if f.nproc > 1 and not errors:
        notes.append(f"the fixed version was launched with `torchrun --nproc_per_node={f.nproc}`"
                     "; its time and memory are rank 0's")
    verdict = "inconclusive" if passed is None else "passed" if passed else "failed"
    row = Row(check, device, verdict, detail, b, f, r,
              f"{check.code}: " + "; ".join(notes) if notes else None, speed=pair)
    if pair is not None:
        row.facts.append(("time", describe(pair)))
    elif f.nproc > 1 and device == "cpu" and b.timing and f.timing:
        row.comparable_time = False
        row.facts.append(("time", f"bad {fmt_seconds(b.timing.median)}, fixed "
                                  f"{fmt_seconds(f.timing.median)} ({f.nproc} processes): not "
                                  f"a meaningful comparison on CPU, without {f.nproc} GPUs"))
    return row
