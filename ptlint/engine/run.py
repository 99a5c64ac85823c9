"""Lint or fix many files: parallel across cores, cached by content, stable order."""
from __future__ import annotations

import gc
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ptlint.engine.job import Job, Outcome, decode_error, process_text, unwritten, usable
from ptlint.io.cache import Cache
from ptlint.io.files import size
from ptlint.io.text import DecodeError, decode, one_line, write_fixed

if TYPE_CHECKING:  # the pool (multiprocessing) is imported only when it is used
    from ptlint.engine.pool import Progress

# Less source than this is linted in this process: starting workers would cost
# more than sharing the work saves (a pool of two, forked once LibCST and the
# rules are imported, pays off from a few tens of kilobytes).
POOL_MIN_BYTES = 64 * 1024


def cached_outcome(path: Path, job: Job, caches: dict[int, Cache]) -> Outcome | None:
    """The outcome of a module whose findings are in the cache, else None.
    `caches`: one per configuration, filled as files need them."""
    if path.suffix == ".ipynb":
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    job = job.for_file(path)
    cache = caches.get(id(job.settings))
    if cache is None:
        cache = caches[id(job.settings)] = Cache(job.settings)
    cached = cache.get(cache.key(str(path), data), str(path))
    return Outcome(str(path), cached, text=None) if usable(cached, job) else None


def process_file(path: Path, job: Job) -> Outcome:
    job = job.for_file(path)
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
    if usable(cached, job):
        return Outcome(name, cached, text=None)
    try:
        source = decode(data)
    except DecodeError as exc:
        return Outcome(name, [decode_error(name, exc)] if job.settings.is_enabled("PTL000", name) else [])
    out = process_text(name, source.text, job)
    if job.timings:
        out.timings["read"] = read + out.timings.get("read", 0.0)
    if cache and job.mode != "noqa" and not (out.errors or out.notices) and out.new_text is None:
        cache.put(key, out.findings)
    if job.mode in ("fix", "noqa") and out.new_text is not None:
        problem = write_fixed(path, source, out.new_text, out.fixed, original=data)
        if problem is not None:
            unwritten(out, source.text, job, problem)
    if not out.findings:
        out.text = None  # only quoted for findings: not worth sending back from a worker
    return out


def _safe(path: Path, job: Job) -> Outcome:
    try:
        return process_file(path, job)
    except RecursionError:
        return Outcome(str(path), errors=[f"{path}: too deeply nested; file skipped"])
    except Exception as exc:  # noqa: BLE001 - one line per file, the run goes on
        return Outcome(str(path), errors=[f"{path}: internal error: {one_line(exc)}"])


def run(files: list[Path], job: Job, jobs: int | None = None,
        progress: Progress | None = None) -> list[Outcome]:
    """Process every file; results come back in the order of `files`. Files the
    cache answers are answered here; the others go to a pool of worker processes
    (see pool) when there are enough of them to pay for it. `progress` is called
    with the number of files done as they are."""
    done = progress or (lambda n: None)
    known: list[Outcome | None] = [None] * len(files)
    if job.cache:
        # On a warm cache, starting workers and sending their results back would
        # cost more than the lookups themselves.
        caches: dict[int, Cache] = {}
        known = [cached_outcome(path, job, caches) for path in files]
        done(sum(outcome is not None for outcome in known))
    missing = [path for path, outcome in zip(files, known) if outcome is None]
    fresh = iter(_pooled(missing, job, jobs or os.cpu_count() or 1, done))
    return [outcome if outcome is not None else next(fresh) for outcome in known]


def _pooled(files: list[Path], job: Job, jobs: int, done: Progress) -> list[Outcome]:
    """`files` linted in a pool of `jobs` workers, or in this process when they
    are too few or too small to pay for one."""
    if jobs <= 1 or len(files) < 2 or sum(map(size, files)) < POOL_MIN_BYTES:
        return _in_turn(files, job, done)
    from ptlint.engine import fix  # noqa: F401
    from ptlint.engine.guard import parse
    from ptlint.engine.pool import run_in_pool

    # The workers are forked from this process: what it has imported, they
    # start with, instead of each importing LibCST (its native parser comes
    # with its first parse), the engine, the rules and what choosing the rules
    # imports (packaging's version specifiers).
    parse("")
    job.settings.rules  # noqa: B018 - computed once, here
    gc.freeze()  # their collector then leaves those objects, and their memory, shared
    try:
        return run_in_pool(files, _safe, job, jobs, done)
    finally:
        gc.unfreeze()


def _in_turn(files: list[Path], job: Job, done: Progress) -> list[Outcome]:
    outcomes = []
    for path in files:
        outcomes.append(_safe(path, job))
        done(1)
    return outcomes
