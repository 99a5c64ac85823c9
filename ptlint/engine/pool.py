"""Worker processes: many files linted in parallel by a pool that outlives a
worker's death and never outlives ptlint.

A worker that dies (a crash in native code, the OOM killer) takes its pool down
with every result not yet sent back. Those files go to a fresh pool; the file a
dead worker was on is noted, and a file noted twice is run in a process of its
own, so that only the file at fault is reported and skipped while the rest of
the run keeps its parallel pool.

Workers end with the parent: they die on the SIGHUP of a closed terminal, and
on Linux the kernel sends them SIGTERM when the parent dies in any way (SIGKILL,
the OOM killer); elsewhere a thread of each worker watches for it.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Callable

from ptlint.engine.job import Job, Outcome
from ptlint.io.files import size
from ptlint.io.text import signals_deferred

Work = Callable[[Path, Job], Outcome]
Progress = Callable[[int], None]  # called with the number of files just done
DIED = ("ptlint's worker process died on this file (a crash in the parser, or out of memory); "
        "file skipped")

# Set by the parent before it forks the workers, which inherit them.
_TASK: tuple[Work, Job] | None = None
_SLOTS = None  # shared: two numbers per worker, its pid and the index of its file (-1: none)
_CLAIMED = None  # shared: how many slots the workers of the pool have taken
_SLOT = -1  # in a worker: its own slot


# -- in the workers -------------------------------------------------------------------
def _init_worker(parent: int) -> None:
    """The parent handles Ctrl-C and stops the workers with SIGTERM, which kills a
    worker at once, or right after the file it is writing (see write_atomic). The
    parent forks with SIGINT, SIGTERM and SIGHUP held: all three are let through."""
    global _SLOT
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {s for s in (
            signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None})
    _die_with(parent)
    if _SLOTS is not None and _CLAIMED is not None:
        with _CLAIMED.get_lock():
            _SLOT = _CLAIMED.value
            _CLAIMED.value += 1
        if 2 * _SLOT + 1 < len(_SLOTS):
            _SLOTS[2 * _SLOT] = os.getpid()
            _SLOTS[2 * _SLOT + 1] = -1


def _die_with(parent: int) -> None:
    """SIGTERM to this worker when the process that forked it dies."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pdeathsig = libc.prctl(1, signal.SIGTERM, 0, 0, 0) == 0  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pdeathsig = False
    if not pdeathsig:
        threading.Thread(target=_watch, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # it died before the kernel was told
        os.kill(os.getpid(), signal.SIGTERM)


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os.kill(os.getpid(), signal.SIGTERM)


def _work_batch(batch: list[tuple[int, Path]]) -> list[Outcome]:
    assert _TASK is not None
    work, job = _TASK
    mine = 2 * _SLOT + 1 if _SLOTS is not None and 0 <= _SLOT and 2 * _SLOT + 1 < len(_SLOTS) else -1
    out = []
    for index, path in batch:
        if mine >= 0:
            _SLOTS[mine] = index  # type: ignore[index]
        out.append(work(path, job))
    if mine >= 0:
        _SLOTS[mine] = -1  # type: ignore[index]
    return out


# -- in the parent ------------------------------------------------------------------------
def _pool(workers: int, context, work: Work, job: Job) -> ProcessPoolExecutor:
    global _TASK, _SLOTS, _CLAIMED
    _TASK = (work, job)
    _SLOTS = context.Array("q", [0, -1] * workers, lock=False)
    _CLAIMED = context.Value("i", 0)
    return ProcessPoolExecutor(max_workers=workers, mp_context=context,
                               initializer=_init_worker, initargs=(os.getpid(),))


def _stop(pool: ProcessPoolExecutor) -> None:
    """Interrupted: cancel what has not started and end the workers before returning."""
    workers = list((getattr(pool, "_processes", None) or {}).values())
    for process in workers:
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        process.join()


def run_in_pool(files: list[Path], work: Work, job: Job, jobs: int,
                done: Progress = lambda n: None) -> list[Outcome]:
    """`work(path, job)` for every file in worker processes; results in the order
    of `files`; `done` is told how many files each finished batch held."""
    context = multiprocessing.get_context("fork")
    # Largest files first, so that no worker is left with a big one at the end
    # while the others wait; the results go back to the order of `files`.
    pending = sorted(range(len(files)), key=lambda i: -size(files[i]))
    results: dict[int, Outcome] = {}
    strikes: Counter[int] = Counter()
    while pending:
        for i in [i for i in pending if strikes[i] >= 2]:
            results[i] = _isolated(files[i], context, work, job)
            done(1)
        rest = [i for i in pending if strikes[i] < 2]
        if rest:
            strikes.update(_round(rest, files, results, min(jobs, len(rest)), context, work, job,
                                  done))
        pending = [i for i in rest if i not in results]
    return [results[i] for i in range(len(files))]


def _round(indices: list[int], files: list[Path], results: dict[int, Outcome], workers: int,
           context, work: Work, job: Job, done: Progress) -> list[int]:
    """Run the files in one pool, filling `results`; if a worker died, the files
    to blame (the ones a dead worker was on), else nothing."""
    chunk = max(1, min(16, len(indices) // (workers * 16)))
    batches = [[(i, files[i]) for i in indices[k:k + chunk]]
               for k in range(0, len(indices), chunk)]
    pool = _pool(workers, context, work, job)
    broken = False
    try:
        # The first submit forks the workers: a signal landing inside fork() is
        # swallowed by at-fork hooks ("Exception ignored ... KeyboardInterrupt"),
        # so it is held until the workers exist (they let it through themselves).
        with signals_deferred():
            futures = {pool.submit(_work_batch, batch): batch for batch in batches}
        processes = list((getattr(pool, "_processes", None) or {}).values())
        for future in as_completed(futures):
            try:
                for (i, _), outcome in zip(futures[future], future.result()):
                    results[i] = outcome
            except BrokenProcessPool:
                broken = True
            else:
                done(len(futures[future]))
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown()
    if not broken:
        return []
    return _blamed(processes, [i for i in indices if i not in results])


def _blamed(processes: list, lost: list[int]) -> list[int]:
    """The files the workers that died were on. The pool ends the others with
    SIGTERM; failing that, every file a worker was on; failing that, all lost."""
    slots = _SLOTS
    on: dict[int, int] = {}  # pid -> index of its file
    if slots is not None:
        for k in range(0, len(slots), 2):
            if slots[k] > 0 and slots[k + 1] >= 0:
                on[slots[k]] = slots[k + 1]
    dead = [on[p.pid] for p in processes
            if p.pid in on and p.exitcode not in (None, 0, -signal.SIGTERM)]
    return dead or list(on.values()) or lost


def _isolated(path: Path, context, work: Work, job: Job) -> Outcome:
    """One file in a process of its own: the file that killed two workers."""
    pool = _pool(1, context, work, job)
    try:
        with signals_deferred():
            future = pool.submit(_work_batch, [(0, path)])
        [outcome] = future.result()
    except BrokenProcessPool:
        outcome = Outcome(str(path), errors=[f"{path}: {DIED}"])
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown()
    return outcome

