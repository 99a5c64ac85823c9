"""Lint or fix many files: parallel across cores, cached by content, stable order."""
from __future__ import annotations

import difflib
import hashlib
import multiprocessing
import os
import pickle
import re
import shutil
import signal
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ptlint import __version__
from ptlint.config import Settings
from ptlint.model import SYNTAX_ERROR, Finding, Position, Span
from ptlint.textio import (
    DecodeError,
    FileChanged,
    Source,
    decode,
    encode,
    one_line,
    signals_deferred,
    write_atomic,
)

Mode = Literal["check", "fix", "diff"]


@dataclass
class Outcome:
    path: str
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    text: str | None = None  # the text the findings refer to (after fixing)
    fixed: int = 0
    diff: str | None = None
    new_text: str | None = None  # stdin with --fix: what to print
    timings: dict[str, float] = field(default_factory=dict)
    cells: dict[int, str] = field(default_factory=dict)  # notebooks: cell index -> source


@dataclass
class Job:
    settings: Settings
    mode: Mode = "check"
    unsafe: bool = False
    cache: bool = True
    timings: bool = False


def _decode_error(path: str, exc: DecodeError) -> Finding:
    code, name = SYNTAX_ERROR
    at = Position(exc.line, exc.column)
    return Finding(path, code, name, f"SyntaxError: {exc}", Span(at, at))


_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_NO_EOL = "\n\\ No newline at end of file\n"


def _diff_lines(text: str) -> list[str]:
    """Lines as Python and `patch` see them: str.splitlines() would also break at
    form feeds and other Unicode separators, and the diff would not apply."""
    lines = _LINES.findall(text)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += _NO_EOL
    return lines


def unified_diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(
        _diff_lines(before), _diff_lines(after), fromfile=f"a/{path}", tofile=f"b/{path}",
    ))


def process_text(path: str, text: str, job: Job) -> Outcome:
    """Lint (or fix) one module's text; the notebook and stdin paths share this."""
    # The engine imports LibCST and the rules: not needed when every result is cached.
    from ptlint.engine import fix_text, lint_text

    timings: dict[str, float] | None = {} if job.timings else None
    if job.mode == "check":
        result = lint_text(text, path, job.settings, timings=timings)
        return Outcome(path, result.findings, result.errors, text, timings=timings or {})
    started = time.perf_counter()
    fixed = fix_text(text, path, job.settings, unsafe=job.unsafe)
    if timings is not None:
        timings["fix (all passes)"] = time.perf_counter() - started
    out = Outcome(path, fixed.result.findings, fixed.result.errors, fixed.text,
                  fixed=fixed.applied, timings=timings or {})
    if fixed.text != text:
        out.new_text = fixed.text
        if job.mode == "diff":
            out.diff = unified_diff(path, text, fixed.text)
            out.text = text
            out.findings = lint_text(text, path, job.settings).findings
    return out


class _ModelUnpickler(pickle.Unpickler):
    """Loads findings and nothing else. The cache lives in the project folder, so a
    repository could ship a crafted entry (its key is computable): a plain
    pickle.load would run whatever that entry names."""

    ALLOWED = frozenset({"Finding", "Span", "Position", "Fix", "Edit", "Safety"})

    def find_class(self, module: str, name: str):
        if module == "ptlint.model" and name in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in ptlint's cache")


class Cache:
    """Results keyed by file content, ptlint version and effective settings.

    One small file per entry, written atomically, so concurrent runs can share it.
    """

    def __init__(self, settings: Settings) -> None:
        self.folder = settings.root / settings.cache_dir / __version__
        self.salt = f"{__version__}\0{settings.fingerprint()}".encode()

    def key(self, path: str, data: bytes) -> str:
        return hashlib.sha256(self.salt + os.fsencode(path) + b"\0" + data).hexdigest()

    def get(self, key: str) -> list[Finding] | None:
        try:
            with open(self.folder / key[:2] / key, "rb") as handle:
                found = _ModelUnpickler(handle).load()
        except Exception:  # noqa: BLE001 - a damaged or foreign entry is only a miss
            return None
        if not isinstance(found, list) or not all(isinstance(f, Finding) for f in found):
            return None
        return found

    def put(self, key: str, findings: list[Finding]) -> None:
        folder = self.folder / key[:2]
        try:
            folder.mkdir(parents=True, exist_ok=True)
            top = self.folder.parent
            if not (top / ".gitignore").exists():
                (top / ".gitignore").write_text("# created by ptlint\n*\n")
            with signals_deferred():
                fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
                try:
                    with os.fdopen(fd, "wb") as handle:
                        pickle.dump(findings, handle, protocol=pickle.HIGHEST_PROTOCOL)
                    os.replace(tmp, folder / key)
                except BaseException:
                    os.unlink(tmp)
                    raise
        except (OSError, pickle.PickleError):
            pass  # a cache that cannot be written is only slower


def clean(settings: Settings) -> bool:
    folder = settings.root / settings.cache_dir
    if folder.is_dir():
        shutil.rmtree(folder, ignore_errors=True)
        return True
    return False


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
    cached = cache.get(cache.key(str(path), data))
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
        from ptlint import notebook

        return notebook.process(path, data, job)
    cache = Cache(job.settings) if job.cache else None
    key = cache.key(name, data) if cache else ""
    cached = cache.get(key) if cache else None
    if _usable(cached, job):
        return Outcome(name, cached, text=None)
    try:
        source = decode(data)
    except DecodeError as exc:
        return Outcome(name, [_decode_error(name, exc)] if job.settings.is_enabled("PTL000", name) else [])
    out = process_text(name, source.text, job)
    if job.timings:
        out.timings["read"] = read + out.timings.get("read", 0.0)
    if cache and not out.errors and out.new_text is None:
        cache.put(key, out.findings)
    if job.mode == "fix" and out.new_text is not None:
        write_fixed(path, source, out, original=data)
    if not out.findings:
        out.text = None  # only quoted for findings: not worth sending back from a worker
    return out


def write_fixed(path: Path, source: Source, out: Outcome, original: bytes | None = None) -> None:
    name = str(path)
    try:
        writable = os.access(path, os.W_OK) and bool(path.stat().st_mode & 0o222)
    except OSError:
        writable = False
    if not writable:  # root may write anything: the mode bits say what the owner wants
        out.errors.append(f"{name}: file is read-only; {out.fixed} fix(es) not written")
        out.fixed = 0
        return
    try:
        data = encode(source, out.new_text or "")
    except UnicodeEncodeError:
        out.errors.append(f"{name}: fixed text cannot be encoded as {source.encoding}; not written")
        out.fixed = 0
        return
    try:
        write_atomic(path, data, expected=original)
    except FileChanged:
        out.errors.append(f"{name}: changed while ptlint was fixing it; not written")
        out.fixed = 0
    except OSError as exc:
        out.errors.append(f"{name}: cannot write: {exc.strerror or exc}")
        out.fixed = 0


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
