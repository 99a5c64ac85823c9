"""`ptlint check --watch`: lint, then lint again whenever a file changes (ruff's
`--watch`). The files are polled, twice a second: no dependency, and it works
on every file system, network and container mounts included."""
from __future__ import annotations

import os
import signal
import sys
import time
from typing import Callable, Iterable

POLL_SECONDS = 0.5
# What a change of is worth linting again for: code, notebooks, configuration,
# requirements (the target torch version) and ignore files; not logs or output,
# which a run may itself write into the folder.
_CODE = (".py", ".pyi", ".ipynb", ".toml")
_NAMED = frozenset({"setup.cfg", ".gitignore"})


def _watched(name: str) -> bool:
    return name.endswith(_CODE) or name in _NAMED or (
        name.startswith("requirements") and name.endswith(".txt"))
# Folders whose changes never matter (the cache ptlint itself writes among them).
_SKIPPED = frozenset({".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__",
                      ".ptlint_cache", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox"})


def snapshot(paths: Iterable[str]) -> frozenset[tuple[str, int, int]]:
    """(path, modification time, size) of every watched file under `paths`."""
    found = set()
    for top in paths:
        if os.path.isfile(top):
            found |= _stat(top)
            continue
        for folder, folders, files in os.walk(top):
            folders[:] = [f for f in folders if f not in _SKIPPED]
            for name in files:
                if _watched(name):
                    found |= _stat(os.path.join(folder, name))
    return frozenset(found)


def _stat(path: str) -> set[tuple[str, int, int]]:
    try:
        st = os.stat(path)
    except OSError:  # removed meanwhile: the next snapshot tells
        return set()
    return {(path, st.st_mtime_ns, st.st_size)}


def watch(paths: list[str], lint: Callable[[], int]) -> int:
    """Run `lint` now and after every change under `paths`, until interrupted.

    Ctrl-C is also noted in a flag the loop checks: a KeyboardInterrupt raised
    while Python runs a finalizer (a generator closed by the garbage collector)
    is printed and dropped, and the loop would otherwise go on watching."""
    say = sys.stderr
    interrupted = []

    def on_interrupt(signum: int, frame: object) -> None:
        interrupted.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        print("Starting linter in watch mode...", file=say)
        while not interrupted:
            seen = snapshot(paths)
            lint()
            print("Watching for file changes.", file=say, flush=True)
            sys.stdout.flush()
            while snapshot(paths) == seen and not interrupted:
                time.sleep(POLL_SECONDS)
            if interrupted:
                break
            if sys.stdout.isatty():
                print("\033[2J\033[H", end="")  # a clear screen for each run, as ruff's
            print("File change detected...", file=say)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, previous)
    return 0
