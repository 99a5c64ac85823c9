"""Latency of `ptlint server`: from a `didChange` to the `publishDiagnostics` of
that version, on a warm server over stdio.

    .venv/bin/python bench/lsp_latency.py TRAINING_FILE [--runs 30] [--large-lines 10000]

TRAINING_FILE is a real training script of about 2,000 lines (kept outside the
repository; for instance huggingface/diffusers'
examples/dreambooth/train_dreambooth_lora_sdxl.py). The large file is that
script repeated until it has `--large-lines` lines. Each change edits one line
in the middle of the file, as typing does, and waits for its diagnostics
before the next, so every figure is one change's full latency: the lint (the
changed statements re-parsed, the rules run on the whole file) and the round
trip. For comparison, in this process: the whole lint of the text
(`lint_text`, as the command line does it), and the phases of the server's
lint of the same changes (parse, rules, findings).

Prints a table ready to paste into the README, with the machine it ran on.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Empty, Queue

from ptlint import __version__

TIMEOUT = 600


class Server:
    """`ptlint server` in a subprocess, spoken to in raw JSON-RPC."""

    def __init__(self, cache: str) -> None:
        env = dict(os.environ, XDG_CACHE_HOME=cache)
        self.proc = subprocess.Popen([sys.executable, "-m", "ptlint", "server"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.inbox: Queue = Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0

    def _read(self) -> None:
        stream = self.proc.stdout
        assert stream is not None
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            assert length is not None
            self.inbox.put((time.perf_counter(), json.loads(stream.read(length))))

    def send(self, method: str, params: object, *, request: bool = False) -> float:
        message: dict = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            message["id"] = self.next_id
        body = json.dumps(message).encode()
        assert self.proc.stdin is not None
        sent = time.perf_counter()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.proc.stdin.flush()
        return sent

    def wait(self, test) -> tuple[float, dict]:
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                at, message = self.inbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except Empty:
                raise SystemExit("no answer from the server") from None
            if test(message):
                return at, message

    def close(self) -> None:
        self.send("shutdown", None, request=True)
        self.wait(lambda m: "result" in m and m.get("id") == self.next_id)
        self.send("exit", None)
        self.proc.wait(timeout=TIMEOUT)


def published(uri: str, version: int):
    return lambda m: (m.get("method") == "textDocument/publishDiagnostics"
                      and m["params"]["uri"] == uri and m["params"].get("version") == version)


def measure(server: Server, path: Path, text: str, runs: int) -> tuple[list[float], int]:
    """Latencies in seconds of `runs` changes, after three to warm up; and the
    number of findings."""
    uri = path.resolve().as_uri()
    server.send("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "python", "version": 1, "text": text}})
    _, first = server.wait(published(uri, 1))
    lines = text.split("\n")
    target = len(lines) // 2  # a line in the middle: typing at its end
    column = len(lines[target])
    times = []
    for version in range(2, runs + 5):
        typed = version % 2 == 0  # type a space, then delete it
        change = {"range": {"start": {"line": target, "character": column},
                            "end": {"line": target, "character": column + (0 if typed else 1)}},
                  "text": " " if typed else ""}
        sent = server.send("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version}, "contentChanges": [change]})
        at, _ = server.wait(published(uri, version))
        if version >= 5:
            times.append(at - sent)
    server.send("textDocument/didClose", {"textDocument": {"uri": uri}})
    return times, len(first["params"]["diagnostics"])


def lint_alone(path: Path, text: str, runs: int) -> tuple[list[float], dict[str, float]]:
    """In this process: the whole lint of the text, `runs` times; and the
    median phases (parse, rules, findings, total) of the server's lint of the
    same changes as `measure` makes, which re-parses only what changed."""
    from ptlint.config_files import find_config, load_config
    from ptlint.engine.lint import lint_text
    from ptlint.engine.reparse import Reparser

    settings = load_config(find_config(path))
    lint_text(text, str(path), settings)
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        lint_text(text, str(path), settings)
        out.append(time.perf_counter() - started)
    parser = Reparser()
    lint_text(text, str(path), settings, parser=parser)
    lines = text.split("\n")
    target = len(lines) // 2
    phases: dict[str, list[float]] = {}
    for version in range(runs + 3):
        edited = list(lines)
        edited[target] += " " * (version % 2)
        timings: dict[str, float] = {}
        started = time.perf_counter()
        lint_text("\n".join(edited), str(path), settings, timings=timings, parser=parser)
        timings["total"] = time.perf_counter() - started
        if version >= 3:
            for name in ("parse", "rules", "findings", "total"):
                phases.setdefault(name, []).append(timings.get(name, 0.0))
    return out, {name: statistics.median(values) for name, values in phases.items()}


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("training_file", type=Path)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--large-lines", type=int, default=10_000)
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/ptlint-lsp-bench"),
                        help="where the large file and the documentation cache go")
    args = parser.parse_args()
    text = args.training_file.read_text(encoding="utf-8")
    if not text.endswith("\n"):
        text += "\n"
    large = text
    while large.count("\n") < args.large_lines:
        large += text
    args.scratch.mkdir(parents=True, exist_ok=True)
    large_path = args.scratch / f"large_{args.training_file.name}"
    large_path.write_text(large, encoding="utf-8")

    from ptlint.server.server import DEBOUNCE

    server = Server(str(args.scratch / "cache"))
    server.send("initialize", {"processId": os.getpid(), "capabilities": {}}, request=True)
    server.wait(lambda m: m.get("id") == 1)
    server.send("initialized", {})
    rows = []
    for path, body in ((args.training_file, text), (large_path, large)):
        times, findings = measure(server, path, body, args.runs)
        alone, phases = lint_alone(path, body, max(5, args.runs // 3))
        rows.append((path.name, body.count("\n"), findings, times, alone, phases))
    server.close()

    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",) * 3
    print(f"ptlint {__version__} server, Python {platform.python_version()}, "
          f"{platform.machine()}, {os.cpu_count()} cores, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end; debounce {DEBOUNCE * 1000:.0f} ms "
          f"(only while a lint runs); "
          f"{args.runs} changes per file, each waited for.\n")
    print("| file | lines | findings | median ms | p95 ms | min ms | max ms | whole lint ms "
          "| server's lint: parse / rules / findings / total ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, lines, findings, times, alone, phases in rows:
        ms = [t * 1000 for t in times]
        split = " / ".join(f"{phases[k] * 1000:.0f}" for k in ("parse", "rules", "findings", "total"))
        print(f"| {name} | {lines:,} | {findings} | {statistics.median(ms):.0f} | {p95(ms):.0f} | "
              f"{min(ms):.0f} | {max(ms):.0f} | {statistics.median(alone) * 1000:.0f} | {split} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
