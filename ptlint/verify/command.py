"""The `ptlint verify` command: options, and the run from checks to report."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # `ptlint` builds its parser from this module: keep its import light
    import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("targets", nargs="*", metavar="RULE|SCRIPT",
                        help="rule codes (default: every rule with runnable fixtures) or "
                             "Python files: one that defines main(device) has it called, "
                             "any other runs as a program, with the arguments after `--`")
    parser.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu",
                        help="where main() runs (auto: CUDA when available)")
    parser.add_argument("--output-format", choices=("full", "json"), default="full")
    parser.add_argument("--report", type=Path, metavar="FILE.html",
                        help="also write one self-contained HTML page: memory over steps, "
                             "time per round and the verdicts, charted (needs matplotlib)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed for torch, random (and numpy) before every call of main()")
    parser.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                        help="time limit for each version's process")
    parser.add_argument("--min-time", type=float, default=0.5, metavar="SECONDS",
                        help="how long to time each version (blocked autorange)")
    parser.add_argument("--rounds", type=int, default=5, metavar="N",
                        help="interleaved timing rounds, bad then fixed (default 5): a script "
                             "runs N times each; the ratio's confidence interval comes from "
                             "them")
    parser.add_argument("--no-timing", dest="timing", action="store_false",
                        help="check results and memory only")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads per process (default 1, as torch.utils.benchmark)")
    parser.add_argument("-j", "--jobs", type=int, default=1,
                        help="versions run at once (default 1: timings stay honest)")
    parser.add_argument("--no-fork", dest="fork", action="store_false",
                        help="start every version in a fresh interpreter (slower: torch is "
                             "imported each time) instead of forking it from a server that "
                             "imported torch once")
    parser.add_argument("--root", type=Path, help="the ptlint checkout holding fixtures/ "
                        "and runtime_checks/ (default: found from the current folder up, "
                        "else the pairs this ptlint was installed with)")


def split_script_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """`verify train.py -- --epochs 1`: (what ptlint parses, the script's arguments)."""
    if argv[:1] == ["verify"] and "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1:]
    return argv, []


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(args: argparse.Namespace) -> int:
    import tempfile
    import warnings
    from concurrent.futures import ThreadPoolExecutor

    from ptlint.verify.checks import (CODE, UsageError, check_for_script, checks_for_rules,
                                      find_root, takes_device)
    from ptlint.verify.script import prepare, run_program
    from ptlint.verify.report import render_json, render_table
    from ptlint.verify.run import (Options, finish_check, fork_available, fork_context, plan_check,
                                   start_check)

    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    try:
        import torch
    except ImportError:
        return _error("`ptlint verify` runs PyTorch programs and needs torch: pip install "
                      "torch, or install ptlint with its extra: pip install "
                      "'/path/to/ptlint[runtime]'")

    if args.report is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            return _error("--report draws its charts with matplotlib: pip install matplotlib, "
                          "or install ptlint with its extra: pip install "
                          "'/path/to/ptlint[runtime]'")
        if not args.report.parent.resolve().is_dir():
            return _error(f"--report {args.report}: no folder {args.report.parent}")
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    elif device == "cuda" and not torch.cuda.is_available():
        return _error("--device cuda: CUDA is not available (torch "
                      f"{torch.__version__}); use --device cpu or auto")
    opts = Options(device=device, seed=args.seed, timeout=args.timeout, min_time=args.min_time,
                   timing=args.timing, rounds=max(1, args.rounds), jobs=max(1, args.jobs), threads=max(1, args.threads),
                   fork=args.fork and fork_available())
    root = args.root.resolve() if args.root else find_root()
    if args.root and not (root / "fixtures").is_dir():
        return _error(f"--root {args.root}: no fixtures/ folder there")
    codes = [t.upper() for t in args.targets if CODE.match(t) and not Path(t).exists()]
    scripts = [Path(t) for t in args.targets if t.upper() not in codes]
    script_args = list(getattr(args, "script_args", []))
    programs = [s for s in scripts if script_args or not takes_device(s)]
    scripts = [s for s in scripts if s not in programs]
    with tempfile.TemporaryDirectory(prefix="ptlint-verify-") as tmp:
        workdir = Path(tmp)
        try:
            checks = checks_for_rules(root, codes) if codes or not (scripts or programs) else []
            nothing, runs = [], []
            for number, program in enumerate(programs):
                check = prepare(program, script_args, root, workdir / f"program{number}")
                if check is None:
                    nothing.append(str(program))
                else:
                    runs.append(check)
            for script in scripts:
                check = check_for_script(script, root, workdir)
                if check is None:
                    nothing.append(str(script))
                else:
                    checks.append(check)
        except UsageError as exc:
            return _error(str(exc))
        for script in nothing:
            print(f"{script}: ptlint has nothing to fix, so there is nothing to verify",
                  file=sys.stderr)
        if not checks and not runs:
            return 0 if nothing else _error("no runnable bad/fixed pairs found")
        plans = [plan_check(check, opts) for check in checks]
        if opts.fork and (runs and device == "cpu" or any(p.device == "cpu" for p in plans)):
            fork_context(opts.threads)  # before any thread: it briefly swaps os.environ
        rows = [run_program(check, script_args, opts, check.bad.parent.parent) for check in runs]
        with ThreadPoolExecutor(max_workers=opts.jobs) as pool:
            pending = [start_check(p, opts, workdir, pool) for p in plans]
            rows += [row for p in pending for row in finish_check(p, opts)]
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else None
    info = {"torch": torch.__version__, "device": device, "gpu": gpu, "seed": opts.seed,
            "threads": opts.threads, "python": sys.version.split()[0]}
    where = f"cuda ({gpu})" if gpu else device
    header = (f"ptlint verify: torch {torch.__version__}, {where}, seed {opts.seed}, "
              f"{opts.threads} thread{'s' * (opts.threads != 1)} per process")
    if args.output_format == "json":
        print(render_json(rows, info))
    else:
        render_table(rows, header)
    if args.report is not None:
        from ptlint.verify.html import write_html

        write_html(rows, header, args.report)
        print(f"report written to {args.report}",
              file=sys.stderr if args.output_format == "json" else sys.stdout)
    return 1 if any(r.verdict == "failed" for r in rows) else 0
