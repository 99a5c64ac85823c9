"""The `ptlint` command line."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Sequence

from ptlint import __version__

COMMANDS = ("check", "rule", "rules", "clean", "verify", "server")


def _codes(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


def _check_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="lint files and folders (the default command)")
    p.add_argument("paths", nargs="*", default=None, help="files or folders; '-' reads stdin")
    fix = p.add_argument_group("fixing")
    fix.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    fix.add_argument("--unsafe-fixes", action="store_true", default=None,
                     help="also apply (with --fix) or show unsafe fixes")
    fix.add_argument("--no-unsafe-fixes", dest="unsafe_fixes", action="store_false")
    fix.add_argument("--diff", action="store_true",
                     help="print the diff --fix would write; change nothing")
    sel = p.add_argument_group("rule selection")
    for flag in ("select", "extend-select", "ignore", "fixable", "unfixable"):
        sel.add_argument(f"--{flag}", type=_codes, action="extend", default=None,
                         metavar="CODES", help="comma-separated codes, prefixes or ALL")
    out = p.add_argument_group("output")
    out.add_argument("--output-format", choices=("full", "concise", "json", "sarif", "github",
                                                 "gitlab"))
    out.add_argument("--statistics", action="store_true", help="count findings per rule")
    out.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")
    out.add_argument("--timings", action="store_true", help="time each phase and rule")
    out.add_argument("-q", "--quiet", action="store_true", help="print findings only")
    run = p.add_argument_group("run")
    run.add_argument("--config", type=Path, help="a pyproject.toml or ptlint.toml to use")
    run.add_argument("--torch-version", help="target torch version, e.g. 2.4")
    run.add_argument("--stdin-filename", help="the name to report for '-' input")
    run.add_argument("--extend-exclude", type=_codes, action="extend", default=None,
                     metavar="GLOBS")
    run.add_argument("--extend-include", type=_codes, action="extend", default=None,
                     metavar="GLOBS")
    run.add_argument("--force-exclude", action="store_true", default=None,
                     help="apply exclude rules to files named on the command line too "
                          "(for pre-commit, which passes every file by name)")
    run.add_argument("-j", "--jobs", type=int, default=None, help="processes (default: all cores)")
    run.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ptlint", description="A linter and autofixer for PyTorch code.",
        epilog="`ptlint PATH` is short for `ptlint check PATH`.",
    )
    parser.add_argument("--version", action="version", version=f"ptlint {__version__}")
    sub = parser.add_subparsers(dest="command")
    _check_parser(sub)
    rule = sub.add_parser("rule", help="print a rule's documentation")
    rule.add_argument("code", help="a code (PTL001) or name (loss-kept-with-graph)")
    rules = sub.add_parser("rules", help="list every rule")
    rules.add_argument("--output-format", choices=("full", "json"), default="full")
    clean = sub.add_parser("clean", help="remove the result cache")
    clean.add_argument("--config", type=Path)
    from ptlint.verify import command as verify  # torch-free: torch only when it runs

    verify.add_arguments(sub.add_parser(
        "verify", help="run rules' bad and fixed programs: check, time, measure memory"))
    sub.add_parser("server", help="a language server over stdio, for editors "
                                  '(needs pip install "ptlint[server]")')
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version"):
        argv.insert(0, "check")
    elif not argv:
        argv = ["check"]
    signal.signal(signal.SIGTERM, _terminate)
    if hasattr(signal, "SIGHUP"):  # the terminal was closed: stop as for SIGTERM
        signal.signal(signal.SIGHUP, _terminate)
    _tolerant_streams()
    try:
        args = build_parser().parse_args(argv)
        if args.command == "rule":
            return cmd_rule(args.code)
        if args.command == "rules":
            return cmd_rules(args.output_format)
        if args.command == "clean":
            return cmd_clean(args)
        if args.command == "verify":
            from ptlint.verify import command as verify

            return verify.main(args)
        if args.command == "server":
            from ptlint.server import main as serve

            return serve()
        return cmd_check(args)
    except KeyboardInterrupt:
        print("ptlint: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _tolerant_streams() -> None:
    """Never fail on output: a file name that is not UTF-8 (kept by Python as
    lone surrogates) or a character the terminal's encoding lacks is escaped,
    not raised as UnicodeEncodeError after the work is done."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def error(message: str) -> None:
    from ptlint.io.text import printable  # a file name may hold an escape sequence

    print(f"error: {printable(message)}", file=sys.stderr)


# -- ptlint rule / rules / clean ------------------------------------------------
def _find_rule(code: str):
    from ptlint.rule import registry

    for rule in registry().values():
        if code.upper() == rule.code or code == rule.name:
            return rule
    return None


def cmd_rule(code: str) -> int:
    from ptlint.docs import rule_markdown

    rule = _find_rule(code)
    if rule is None:
        error(f"unknown rule {code!r}; `ptlint rules` lists them")
        return 2
    print(rule_markdown(rule))
    return 0


def cmd_rules(fmt: str) -> int:
    from ptlint.docs import fix_label
    from ptlint.rule import registry

    rules = list(registry().values())
    if fmt == "json":
        print(json.dumps([{
            "code": r.code, "name": r.name, "message": r.description(), "fix": fix_label(r),
            "default": r.default_enabled, "summary": r.summary(), "url": r.url(),
        } for r in rules], indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("code", "name", "fix", "default"):
        table.add_column(column, no_wrap=True)
    table.add_column("finds", overflow="fold")
    for r in rules:
        table.add_row(r.code, r.name, fix_label(r), "on" if r.default_enabled else "off",
                      r.description().replace("`", ""))
    Console(soft_wrap=False, highlight=False).print(table)
    return 0


def cmd_clean(args: argparse.Namespace) -> int:
    from ptlint.config import ConfigError, find_config, load_config
    from ptlint.io.cachedir import CacheError, cache_folder, clean

    try:
        settings = load_config(args.config or find_config(Path.cwd()))
        cleaned = clean(settings)
    except (ConfigError, CacheError) as exc:
        error(f"{exc}; nothing removed" if isinstance(exc, CacheError) else str(exc))
        return 2
    except OSError as exc:
        error(f"{exc.filename or cache_folder(settings)}: cannot remove: {exc.strerror}")
        return 2
    if cleaned is None:
        print("no cache to remove", file=sys.stderr)
        return 0
    print(f"removed the cache ({cleaned.removed} file{'s' * (cleaned.removed != 1)})",
          file=sys.stderr)
    if cleaned.kept:
        shown = ", ".join(cleaned.kept[:5]) + (", ..." if len(cleaned.kept) > 5 else "")
        print(f"kept {len(cleaned.kept)} entr{'ies' if len(cleaned.kept) != 1 else 'y'} ptlint "
              f"did not write: {shown}", file=sys.stderr)
    return 0


# -- ptlint check ------------------------------------------------------------------
def _settings(args: argparse.Namespace, anchor: Path):
    from ptlint.config import find_config, load_config, parse_version

    overrides = {
        "select": args.select, "extend_select": args.extend_select, "ignore": args.ignore,
        "fixable": args.fixable, "unfixable": args.unfixable,
        "unsafe_fixes": args.unsafe_fixes, "output_format": args.output_format,
        "torch_version": args.torch_version, "force_exclude": args.force_exclude,
    }
    config = args.config
    if config is not None and not config.is_file():
        from ptlint.config import ConfigError

        raise ConfigError(f"{config}: no such config file")
    settings = load_config(config or find_config(anchor), overrides)
    if args.extend_exclude:
        settings.extend_exclude = [*settings.extend_exclude, *args.extend_exclude]
    if args.extend_include:
        settings.extend_include = [*settings.extend_include, *args.extend_include]
    return settings


def cmd_check(args: argparse.Namespace) -> int:
    from ptlint.config import ConfigError
    from ptlint.io.files import discover
    from ptlint.engine.job import Job
    from ptlint.engine.run import run

    paths = args.paths or ["."]
    stdin = paths == ["-"]
    anchor = Path(args.stdin_filename or ".") if stdin else Path(paths[0])
    try:
        settings = _settings(args, anchor if anchor.exists() else Path.cwd())
    except ConfigError as exc:
        error(str(exc))
        return 2
    mode = "diff" if args.diff else "fix" if args.fix else "check"
    job = Job(settings, mode, unsafe=bool(settings.unsafe_fixes), cache=not args.no_cache and not stdin,
              timings=args.timings)
    if job.cache:
        from ptlint.io.cachedir import CacheError, check

        try:
            check(settings)
        except CacheError as exc:
            error(str(exc))
            return 2
    errors: list[str] = []
    if stdin:
        stdin_out, echo = _stdin(args, job)
        outcomes = [stdin_out]
    else:
        if "-" in paths:
            error("'-' (stdin) cannot be combined with other paths")
            return 2
        found = discover(paths, settings)
        errors.extend(found.errors)
        outcomes = run(found.files, job, args.jobs)
    for out in outcomes:
        errors.extend(out.errors)
    findings = [f for out in outcomes for f in out.findings]
    fixed = sum(out.fixed for out in outcomes)
    stream = sys.stderr if stdin and mode == "fix" else sys.stdout

    if mode == "diff":
        diffs = [out.diff for out in outcomes if out.diff]
        sys.stdout.write("".join(diffs))
        would = sum(out.fixed for out in outcomes if out.diff)
        if not args.quiet:
            print(f"Would fix {would} finding{'s' * (would != 1)} in {len(diffs)} "
                  f"file{'s' * (len(diffs) != 1)}.", file=sys.stderr)
        for message in errors:
            error(message)
        return 2 if errors else 1 if diffs else 0

    if stdin and mode == "fix":  # the file, fixed or as it came, byte for byte
        sys.stdout.flush()
        sys.stdout.buffer.write(echo)
        sys.stdout.buffer.flush()

    if args.statistics:
        _statistics(findings, settings, stream, job.unsafe)
    else:
        _render(findings, outcomes, settings.output_format, stream, errors)
    fmt = settings.output_format
    if not args.quiet and fmt in ("full", "concise") and not args.statistics and (
        findings or not errors or mode == "fix"
    ):
        _summary(findings, fixed, settings, job.unsafe, mode, stream)
    if args.timings:
        _timings(outcomes)
    for message in errors:
        error(message)
    if errors:
        return 2
    return 0 if not findings or args.exit_zero else 1


def _stdin(args: argparse.Namespace, job) -> "tuple[Outcome, bytes]":
    """The outcome for standard input, and the bytes `--fix` prints: the input
    unchanged unless fixed, in the input's own encoding, BOM and line endings."""
    from ptlint.engine.job import Outcome, decode_error, process_text, unwritten
    from ptlint.io.text import DecodeError, decode, encode

    name = args.stdin_filename or "-"
    data = sys.stdin.buffer.read()
    if name.endswith(".ipynb"):
        from ptlint.engine import notebook

        from ptlint.io.notebook import encode_like

        out = notebook.process(Path(name), data, job, write=False)
        return out, data if out.new_text is None else encode_like(data, out.new_text)
    try:
        source = decode(data)
    except DecodeError as exc:
        return Outcome(name, [decode_error(name, exc)]), data
    out = process_text(name, source.text, job)
    if out.new_text is None:
        return out, data
    try:
        return out, encode(source, out.new_text)
    except UnicodeEncodeError:
        unwritten(out, source.text, job, f"{name}: fixed text cannot be encoded as "
                  f"{source.encoding}; printed unchanged")
        return out, data


def _sources(findings, outcomes) -> dict[str, str]:
    from ptlint.io.text import read_source

    from ptlint.output import source_key

    sources = {out.path: out.text for out in outcomes if out.text is not None}
    for out in outcomes:  # notebooks: each cell's source (and, above, the .ipynb file)
        sources.update((source_key(out.path, i), text) for i, text in out.cells.items())
    for f in findings:
        if f.path not in sources and f.cell is None:
            try:
                sources[f.path] = read_source(Path(f.path)).text
            except Exception:  # noqa: BLE001 - quoting is best effort
                sources[f.path] = ""
    return sources


def _render(findings, outcomes, fmt: str, stream, errors: list[str]) -> None:
    from ptlint.output import FORMATS

    sources = _sources(findings, outcomes) if fmt not in ("concise", "json") else {}
    rendered = FORMATS[fmt](findings, sources, errors)
    if fmt == "full":
        if findings:
            from rich.console import Console

            Console(file=stream, soft_wrap=True, highlight=False).print(rendered)
    else:
        stream.write(rendered)


def _fixable(findings, settings, unsafe: bool) -> int:
    return sum(1 for f in findings if f.fix is not None
               and settings.fix_allowed(f.code, f.fix.safety, unsafe=unsafe))


def _summary(findings, fixed: int, settings, unsafe: bool, mode: str, stream) -> None:
    n = len(findings)
    parts = []
    if mode == "fix":
        parts.append(f"Fixed {fixed} finding{'s' * (fixed != 1)}, {n} remaining.")
    elif n:
        parts.append(f"Found {n} finding{'s' * (n != 1)}.")
    else:
        parts.append("All checks passed!")
    fixable = _fixable(findings, settings, unsafe) if mode != "fix" else 0
    if fixable:
        parts.append(f"[*] {fixable} fixable with `ptlint --fix`.")
    hidden = 0 if unsafe else _fixable(findings, settings, True) - _fixable(findings, settings, False)
    if hidden:
        parts.append(f"{hidden} more fixable with `--fix --unsafe-fixes`.")
    print("\n".join(parts), file=stream)


def _statistics(findings, settings, stream, unsafe: bool) -> None:
    counts = Counter(f.code for f in findings)
    names = {f.code: f.name for f in findings}
    fixable = {f.code for f in findings if f.fix and settings.fix_allowed(f.code, f.fix.safety, unsafe=unsafe)}
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if settings.output_format == "json":
        stream.write(json.dumps([{"code": c, "name": names[c], "count": n, "fixable": c in fixable}
                                 for c, n in rows], indent=2) + "\n")
        return
    width = max((len(str(n)) for _, n in rows), default=1)
    for code, n in rows:
        stream.write(f"{n:>{width}}\t{code}\t[{'*' if code in fixable else ' '}] {names[code]}\n")


def _timings(outcomes) -> None:
    total: Counter[str] = Counter()
    for out in outcomes:
        total.update(out.timings)
    print("timings (seconds, summed over processes):", file=sys.stderr)
    for key, seconds in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"  {seconds:9.3f}  {key}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
