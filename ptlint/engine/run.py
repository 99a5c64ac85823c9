"""Lint or fix many files: parallel across cores, cached by content, stable order."""
from __future__ import annotations

import multiprocessing
import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from ptlint.engine.job import Job, Outcome, decode_error, process_text, unwritten
from ptlint.io.cache import Cache
from ptlint.io.text import DecodeError, decode, one_line, signals_deferred, write_fixed
from ptlint.model import Finding


def _usable(cached: list[Finding] | None, job: Job) -> bool:
    """Whether cached findings answer the job: always when checking; when
    fixing, only if none of them has a fix to apply."""
    return cached is not None and (job.mode == "check" or not any(
        f.fix and job.settings.fix_allowed(f.code, f.fix.safety, unsafe=job.unsafe)
        for f in cached
    ))


def cached_outcome(path: Path, job: Job, cache: Cache) -> Outcome | None:
    """The outcome of a module whose findings are in the cache, else None."""
    if path.suffix == ".ipynb":
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    cached = cache.get(cache.key(str(path), data), str(path))
    return Outcome(str(path), cached, text=None) if _usable(cached, job) else None


def process_file(path: Path, job: Job) -> Outcome:
    name = str(path)
    started = time.perf_counter()
    try:
        data = path.read_bytes()
    except OSError as exc:
        return Outcome(name, errors=[f"{name}: cannot read: {exc.strerror or exc}"])
    read = time.perf_counter() - started
    if path.suffix == ".ipynb":
        from ptlint.engine import notebook

        return notebook.process(path, data, job)
    cache = Cache(job.settings) if job.cache else None
    key = cache.key(name, data) if cache else ""
    cached = cache.get(key, name) if cache else None
    if _usable(cached, job):
        return Outcome(name, cached, text=None)
    try:
        source = decode(data)
    except DecodeError as exc:
        return Outcome(name, [decode_error(name, exc)] if job.settings.is_enabled("PTL000", name) else [])
    out = process_text(name, source.text, job)
    if job.timings:
        out.timings["read"] = read + out.timings.get("read", 0.0)
    if cache and not out.errors and out.new_text is None:
        cache.put(key, out.findings)
    if job.mode == "fix" and out.new_text is not None:
        problem = write_fixed(path, source, out.new_text, out.fixed, original=data)
        if problem is not None:
            unwritten(out, source.text, job, problem)
    if not out.findings:
        out.text = None  # only quoted for findings: not worth sending back from a worker
    return out


_JOB: Job | None = None


def _work(path: Path) -> Outcome:
    assert _JOB is not None
    return _safe(path, _JOB)


def _safe(path: Path, job: Job) -> Outcome:
    try:
        return process_file(path, job)
    except RecursionError:
        return Outcome(str(path), errors=[f"{path}: too deeply nested; file skipped"])
    except Exception as exc:  # noqa: BLE001 - one line per file, the run goes on
        return Outcome(str(path), errors=[f"{path}: internal error: {one_line(exc)}"])


def _work_batch(paths: list[Path]) -> list[Outcome]:
    return [_work(path) for path in paths]


def _init_worker() -> None:
    """The parent handles Ctrl-C and stops the workers with SIGTERM, which kills
    a worker at once, or right after the file it is writing (see write_atomic)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):  # held by the parent while it forked us
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


def _stop(pool: ProcessPoolExecutor) -> None:
    """Interrupted: cancel what has not started and end the workers before returning."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    for process in workers:
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        process.join()


def _pool(workers: int, context) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_worker)


def _isolated(path: Path, context) -> Outcome:
    """One file in a process of its own: after a worker died, find the file that kills it."""
    pool = _pool(1, context)
    try:
        with signals_deferred():  # see run()
            future = pool.submit(_work, path)
        outcome = future.result()
    except BrokenProcessPool:
        outcome = Outcome(str(path), errors=[
            f"{path}: ptlint's worker process died on this file (a crash in the parser, or "
            "out of memory); file skipped"])
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown()
    return outcome


def run(files: list[Path], job: Job, jobs: int | None = None) -> list[Outcome]:
    """Process every file; results come back in the order of `files`.

    A worker that dies (a crash in native code, the OOM killer) takes down its
    pool: the files whose results were lost are then run again one process each,
    so that only the file at fault is reported and skipped.
    """
    jobs = jobs or os.cpu_count() or 1
    if jobs <= 1 or len(files) < 4:
        return [_safe(path, job) for path in files]
    if not job.cache:
        return _in_pool(files, job, jobs)
    # Cached files are answered here: on a warm cache, starting workers and
    # sending their results back would cost more than the lookups themselves.
    cache = Cache(job.settings)
    known = [cached_outcome(path, job, cache) for path in files]
    missing = [path for path, outcome in zip(files, known) if outcome is None]
    fresh = iter(_in_pool(missing, job, jobs) if len(missing) >= 4
                 else [_safe(path, job) for path in missing])
    return [outcome if outcome is not None else next(fresh) for outcome in known]


def _in_pool(files: list[Path], job: Job, jobs: int) -> list[Outcome]:
    global _JOB
    _JOB = job
    context = multiprocessing.get_context("fork")
    # Largest files first, so that no worker is left with a big one at the end
    # while the others wait; the results go back to the order of `files`.
    order = sorted(range(len(files)), key=lambda i: -_size(files[i]))
    chunk = max(1, min(16, len(files) // (jobs * 16)))
    batches = [[files[i] for i in order[k:k + chunk]] for k in range(0, len(order), chunk)]
    done: list[list[Outcome] | None] = [None] * len(batches)
    pool = _pool(min(jobs, len(files)), context)
    try:
        # The first submit forks the workers: a signal landing inside fork() is
        # swallowed by at-fork hooks ("Exception ignored ... KeyboardInterrupt"),
        # so it is held until the workers exist (they unblock it themselves).
        with signals_deferred():
            futures = {pool.submit(_work_batch, batch): i for i, batch in enumerate(batches)}
        for future in as_completed(futures):
            try:
                done[futures[future]] = future.result()
            except BrokenProcessPool:
                pass  # run again one by one below
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown()
    outcomes: list[Outcome] = []
    for batch, results in zip(batches, done):
        outcomes.extend(results if results is not None else [_isolated(p, context) for p in batch])
    in_order: list[Outcome | None] = [None] * len(files)
    for i, outcome in zip(order, outcomes):
        in_order[i] = outcome
    return in_order  # type: ignore[return-value]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
