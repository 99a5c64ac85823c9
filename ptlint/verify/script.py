"""`ptlint verify train.py -- ARGS`: a user's script run as the program it is.

The original and a copy with ptlint's fixes applied each run in a copy of the
script's folder, in a fresh process (`python -m ptlint.verify.launch`), with
the same arguments and seeds. The runs interleave: bad, fixed, bad, fixed, ...
(`--rounds`); the first round's output and memory are compared, every round's
time makes the ratio (`ptlint.verify.timing`).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ptlint.verify.checks import ScriptSpec, UsageError, fix_script, load_spec
from ptlint.verify.compare import fmt_bytes, fmt_seconds
from ptlint.verify.model import Check, Row, ScriptRun, Version
from ptlint.verify.outputs import OutputDiff, compare_output, growth, steps
from ptlint.verify.run import Options, _kill_group, _worker_env, fork_context, timing_of
from ptlint.verify.timing import describe, speed

SHOWN = 4  # differing lines shown side by side
_NETWORK = re.compile(r"URLError|ConnectionError|ConnectTimeout|socket\.gaierror|Name or service "
                      r"not known|Temporary failure in name resolution|Network is unreachable|"
                      r"getaddrinfo failed|HTTPError")
_MISSING = re.compile(r"(?:FileNotFoundError|No such file or directory)\b[^\n]*?'([^'\n]+)'")


class ProgramSpec(ScriptSpec):
    def __init__(self, code: str, specs: list, command: str) -> None:
        super().__init__(code, specs)
        self.command = command

    @property
    def compared(self) -> str:
        return f"what `{self.command}` prints, before and after ptlint's fixes"


def prepare(path: Path, args: list[str], root: Path | None, workdir: Path) -> Check | None:
    """Copy the script's folder twice (bad/, fixed/) and apply the fixes in the
    second copy. None when ptlint has nothing to fix."""
    fixed = fix_script(path)
    if fixed is None:
        return None
    codes, text = fixed
    folder = path.resolve().parent
    ignore = shutil.ignore_patterns(".*", "__pycache__", "*.pyc")
    for label in ("bad", "fixed"):
        try:
            shutil.copytree(folder, workdir / label, ignore=ignore, symlinks=True)
        except (OSError, shutil.Error) as exc:
            raise UsageError(f"{path}: cannot copy its folder {folder}: {exc}") from exc
    (workdir / "fixed" / path.name).write_text(text, encoding="utf-8")
    command = " ".join([path.name, *args])
    spec = ProgramSpec(",".join(codes), [load_spec(root, c) for c in codes], command)
    return Check(",".join(codes), path.name, str(path), workdir / "bad" / path.name,
                 workdir / "fixed" / path.name, spec, codes_fixed=tuple(codes))


def _run_once(script: Path, args: list[str], tag: str, opts: Options, workdir: Path) -> dict:
    jobs = workdir / "jobs"
    jobs.mkdir(exist_ok=True)
    metrics = jobs / f"{tag}.metrics.json"
    job = jobs / f"{tag}.job.json"
    job.write_text(json.dumps({"script": str(script), "args": args, "seed": opts.seed,
                               "metrics": str(metrics)}), encoding="utf-8")
    out, err = jobs / f"{tag}.stdout", jobs / f"{tag}.stderr"
    if opts.fork and opts.device == "cpu":
        status = _run_forked(job, out, err, script.parent, opts)
    else:
        status = _run_fresh(job, out, err, script.parent, opts)
    found = json.loads(metrics.read_text(encoding="utf-8")) if metrics.is_file() else {}
    return {**found, "status": status,
            "stdout": out.read_text(encoding="utf-8", errors="replace"),
            "stderr": err.read_text(encoding="utf-8", errors="replace")}


def _run_fresh(job: Path, out: Path, err: Path, cwd: Path, opts: Options) -> int | None:
    """A fresh interpreter: `python -m ptlint.verify.launch JOB` (CUDA, --no-fork)."""
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen([sys.executable, "-m", "ptlint.verify.launch", str(job)],
                                stdout=o, stderr=e, cwd=str(cwd),
                                env=_worker_env(opts.device, opts.seed, opts.threads),
                                start_new_session=True)
        try:
            status: int | None = proc.wait(timeout=opts.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.wait()
            status = None
    return status


def _run_forked(job: Path, out: Path, err: Path, cwd: Path, opts: Options) -> int | None:
    """A process forked from the server that imported torch once (CPU): the
    script's time then leaves out torch's import, as in the fresh interpreter,
    where the launcher's clock starts after it."""
    process = fork_context(opts.threads).Process(
        target=_forked_launch, args=(str(job), str(out), str(err), str(cwd)))
    process.start()
    process.join(opts.timeout)
    if process.is_alive():
        _kill_group(process.pid)
        process.join()
        return None
    return process.exitcode


def _forked_launch(job: str, out: str, err: str, cwd: str) -> None:
    from ptlint.verify.launch import launch

    os.setsid()  # its own process group, so a timeout takes its children too
    for fd, path in ((1, out), (2, err)):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    os.chdir(cwd)
    code = launch(job)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code & 0xFF)


def _failure(result: dict, opts: Options) -> str | None:
    """Why a run failed, in words; None when it exited 0."""
    if result["status"] is None:
        return f"timed out after {opts.timeout:g} s (--timeout)"
    if result["status"] == 0:
        return None
    tail = result["stderr"].strip().splitlines()[-1:] or ["(no output)"]
    text = f"exit status {result['status']}: {tail[0]}"
    if _NETWORK.search(result["stderr"]):
        return (f"{text}. It needs the network: ptlint verify runs it offline-safe in a "
                "copy of its folder; download what it fetches first and pass its path "
                "through the script's own arguments")
    missing = _MISSING.search(result["stderr"])
    if missing:
        return (f"{text}. It cannot find {missing.group(1)!r}: it runs in a copy of its "
                "folder, so data outside that folder needs an absolute path, passed "
                "through the script's own arguments")
    return text


def run_program(check: Check, args: list[str], opts: Options, workdir: Path) -> Row:
    rounds = max(1, opts.rounds if opts.timing else 1)
    results: dict[str, list[dict]] = {"bad": [], "fixed": []}
    for i in range(rounds):
        for label, script in (("bad", check.bad), ("fixed", check.fixed)):
            results[label].append(_run_once(script, args, f"{label}{i}", opts, workdir))
        if any(_failure(results[v][0], opts) for v in results):
            break  # a crash is not repeated
    versions = {label: _version(label, check, runs, opts) for label, runs in results.items()}
    bad, fixed = versions["bad"], versions["fixed"]
    row = Row(check, opts.device, "inconclusive", "", bad, fixed)
    row.speed = speed([r["wall"] for r in results["bad"]], [r["wall"] for r in results["fixed"]]) \
        if not (bad.error or fixed.error) else None
    row.comparable_time = row.speed is not None  # one run each: no ratio worth showing
    row.verdict, row.detail = _verdict(check, results, opts)
    row.facts = _facts(row, results)
    return row


def _version(label: str, check: Check, runs: list[dict], opts: Options) -> Version:
    first = runs[0]
    version = Version(label, str(check.source if label == "bad" else check.fixed), opts.device)
    points, unit = steps([tuple(x) for x in first.get("lines", [])])
    version.run = ScriptRun(first["status"], first["stdout"], first["stderr"],
                            first.get("peak_host"), first.get("peak_cuda"), points, unit)
    error = _failure(first, opts)
    if error:
        tail = "\n".join(first["stderr"].rstrip().splitlines()[-15:])
        version.error = f"{tail}\n{error}" if tail else error
    times = [r["wall"] for r in runs if "wall" in r and r["status"] == 0]
    if times and not error:
        version.timing = timing_of(times)
        version.wall = sum(times)
    return version


def _lines(result: dict) -> list[str]:
    if "lines" in result:
        return [text for _, text, _, _ in result["lines"]]
    return (result["stdout"] + result["stderr"]).splitlines()


def _verdict(check: Check, results: dict, opts: Options) -> tuple[str, str]:
    bad, fixed = results["bad"][0], results["fixed"][0]
    bad_error, fixed_error = _failure(bad, opts), _failure(fixed, opts)
    if bad_error and fixed_error:
        return "inconclusive", f"nothing to compare: both versions fail: {bad_error}"
    if bad_error:
        return "inconclusive", f"nothing to compare: the original fails ({bad_error}); the " \
                               "fixed version runs"
    if fixed_error:
        return "failed", f"the fixed version fails: {fixed_error}"
    diff = compare_output(_lines(bad), _lines(fixed))
    if diff.same and diff.values == 0:
        return "inconclusive", ("nothing to compare: the script printed no numbers (print or "
                                "log its loss, accuracy or results to compare them)")
    if diff.same:
        return "passed", (f"output equal: {diff.values} printed values on {diff.lines} lines "
                          "agree")
    changing = check.spec.changing() if isinstance(check.spec, ScriptSpec) else {}
    summary = _diff_summary(diff)
    if changing:
        why = "; ".join(f"{code}: {text}" for code, text in changing.items())
        return "passed", f"output changed on purpose: {summary}. Why, as documented: {why}"
    return "failed", f"output differs: {summary}"


def _diff_summary(diff: OutputDiff) -> str:
    parts = []
    if diff.differing:
        largest = diff.largest_change()
        parts.append(f"{len(diff.differing)} of {diff.lines} lines with numbers differ"
                     + (f", by up to {largest[0]:.3g} ({largest[1]:.1%})" if largest else ""))
    if diff.only_bad:
        parts.append(f"{len(diff.only_bad)} lines only in the original")
    if diff.only_fixed:
        parts.append(f"{len(diff.only_fixed)} lines only in the fixed version")
    return "; ".join(parts)


def _memory_fact(v: Version) -> str:
    run = v.run
    assert run is not None
    where = "CUDA" if run.peak_cuda is not None else "host"
    text = f"peak {fmt_bytes(v.peak)} ({where})"
    rate = growth(run.steps)
    if rate is not None:
        plural = "losses" if run.step_unit == "logged loss" else f"{run.step_unit}es" \
            if run.step_unit.endswith("h") else f"{run.step_unit}s"
        text += f", {fmt_bytes(rate)} per {run.step_unit} over {len(run.steps)} logged {plural}"
    return text


def _facts(row: Row, results: dict) -> list[tuple[str, str]]:
    facts = []
    for v in (row.bad, row.fixed):
        if v.run is not None and v.run.status is not None:
            facts.append(("memory", f"{v.label}: {_memory_fact(v)}"))
    if row.speed is not None:
        facts.append(("time", describe(row.speed)))
    elif row.bad.timing and row.fixed.timing:
        facts.append(("time", f"bad {fmt_seconds(row.bad.timing.median)}, fixed "
                              f"{fmt_seconds(row.fixed.timing.median)}, one run each: "
                              "--rounds 2 or more gives a ratio"))
    if not (row.bad.error or row.fixed.error):
        diff = compare_output(_lines(results["bad"][0]), _lines(results["fixed"][0]))
        for a, b in diff.differing[:SHOWN]:
            facts.append(("differs", f"bad:   {a.strip()}"))
            facts.append(("", f"fixed: {b.strip()}"))
        for line in diff.only_bad[:SHOWN]:
            facts.append(("only bad", line.strip()))
        for line in diff.only_fixed[:SHOWN]:
            facts.append(("only fixed", line.strip()))
    return facts
