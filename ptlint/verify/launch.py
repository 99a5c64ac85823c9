"""The launcher: runs a user's script as a program, as `python script.py ARGS`
would, in its own process, and writes what it measured for the parent.

`python -m ptlint.verify.launch JOB.json`. Before the script runs it seeds
random, torch and numpy (the script itself is not edited), and it wraps
sys.stdout and sys.stderr so that every line the script prints (print, logging,
tqdm) is recorded with the memory in use at that moment: the resident set, and
torch's CUDA allocator when CUDA is in use. The parent reads the output itself
from the streams it captured.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO


def _rss() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _cuda_allocated() -> int | None:
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    return int(torch.cuda.memory_allocated())


class _Recorder:
    """A text stream that passes everything on and notes, per completed line,
    (stream, line, resident bytes, CUDA bytes)."""

    def __init__(self, stream: TextIO, name: str, lines: list) -> None:
        self._stream, self._name, self._lines, self._partial = stream, name, lines, ""

    def write(self, text: str) -> int:
        self._partial += text
        *done, self._partial = self._partial.replace("\r", "\n").split("\n")
        if done:
            rss, cuda = _rss(), _cuda_allocated()
            self._lines += [(self._name, line, rss, cuda) for line in done if line.strip()]
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:  # flush, fileno, isatty, encoding, ...
        return getattr(self._stream, name)


def _seed(seed: int) -> None:
    import importlib.util
    import random

    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    if importlib.util.find_spec("numpy") is not None:
        import numpy

        numpy.random.seed(seed)


def launch(job_path: str) -> int:
    import runpy
    import traceback

    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    script = job["script"]
    lines: list = []
    sys.stdout = _Recorder(sys.stdout, "stdout", lines)
    sys.stderr = _Recorder(sys.stderr, "stderr", lines)
    sys.argv = [script, *job["args"]]
    sys.path[0] = str(Path(script).parent)
    _seed(job["seed"])
    status: Any = 0
    start = time.perf_counter()
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        status = exc.code
    except BaseException:  # noqa: BLE001 - the script's own crash, as Python shows it
        traceback.print_exc()
        status = 1
    torch = sys.modules.get("torch")
    cuda = torch is not None and torch.cuda.is_initialized()
    if cuda:
        torch.cuda.synchronize()  # the script's last kernels belong to its time
    wall = time.perf_counter() - start
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    if status is None:
        status = 0
    elif not isinstance(status, int):  # sys.exit("message")
        print(status, file=sys.stderr)
        status = 1
    import resource

    metrics = {
        "status": status, "wall": wall,
        "peak_host": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "peak_cuda": int(torch.cuda.max_memory_allocated()) if cuda else None,
        "lines": lines,
    }
    Path(job["metrics"]).write_text(json.dumps(metrics), encoding="utf-8")
    return status if 0 <= status < 256 else 1  # an exit status is one byte


if __name__ == "__main__":
    if len(sys.argv) == 2:
        sys.exit(launch(sys.argv[1]))
    sys.exit("usage: python -m ptlint.verify.launch JOB.json (use `ptlint verify script.py`)")
