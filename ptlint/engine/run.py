"""Lint or fix many files: parallel across cores, cached by content, stable order."""
from __future__ import annotations

import os
import time
from pathlib import Path

from ptlint.engine.job import Job, Outcome, decode_error, process_text, unwritten
from ptlint.engine.pool import run_in_pool
from ptlint.io.cache import Cache
from ptlint.io.text import DecodeError, decode, one_line, write_fixed
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


def _safe(path: Path, job: Job) -> Outcome:
    try:
        return process_file(path, job)
    except RecursionError:
        return Outcome(str(path), errors=[f"{path}: too deeply nested; file skipped"])
    except Exception as exc:  # noqa: BLE001 - one line per file, the run goes on
        return Outcome(str(path), errors=[f"{path}: internal error: {one_line(exc)}"])


def run(files: list[Path], job: Job, jobs: int | None = None) -> list[Outcome]:
    """Process every file; results come back in the order of `files`. Files go to
    a pool of worker processes (see pool), except those the cache answers."""
    jobs = jobs or os.cpu_count() or 1
    if jobs <= 1 or len(files) < 4:
        return [_safe(path, job) for path in files]
    if not job.cache:
        return run_in_pool(files, _safe, job, jobs)
    # Cached files are answered here: on a warm cache, starting workers and
    # sending their results back would cost more than the lookups themselves.
    cache = Cache(job.settings)
    known = [cached_outcome(path, job, cache) for path in files]
    missing = [path for path, outcome in zip(files, known) if outcome is None]
    fresh = iter(run_in_pool(missing, _safe, job, jobs) if len(missing) >= 4
                 else [_safe(path, job) for path in missing])
    return [outcome if outcome is not None else next(fresh) for outcome in known]
