"""The `ptlint check` command: from the parsed arguments to the exit code.

May import: `ptlint.config`, `ptlint.config_files`, `ptlint.io`, `ptlint.output`,
`ptlint.report`, and the engine lazily (a run answered from the cache must not load
LibCST).
"""
from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ptlint import report
from ptlint.config import TEXT_FORMATS, ConfigError
from ptlint.config_files import Configs
from ptlint.report import error

if TYPE_CHECKING:
    from ptlint.engine.job import Job, Outcome


def _overrides(args: argparse.Namespace, inline: dict | None = None) -> dict:
    """The command line's settings: `--config 'KEY = VALUE'` ones, then the options
    (which win where both set one)."""
    options = {
        "select": args.select, "extend_select": args.extend_select, "ignore": args.ignore,
        "fixable": args.fixable, "extend_fixable": args.extend_fixable,
        "unfixable": args.unfixable, "per_file_ignores": args.per_file_ignores,
        "extend_per_file_ignores": args.extend_per_file_ignores, "exclude": args.exclude,
        "show_fixes": args.show_fixes,
        "unsafe_fixes": args.unsafe_fixes, "output_format": args.output_format,
        "torch_version": args.torch_version, "force_exclude": args.force_exclude,
        "extend_exclude": args.extend_exclude, "extend_include": args.extend_include,
        "ignore_noqa": args.ignore_noqa or None, "respect_gitignore": args.respect_gitignore,
    }
    return {**(inline or {}), **{k: v for k, v in options.items() if v is not None},
            **cache_dir_override(args)}


def cache_dir_override(args: argparse.Namespace) -> dict:
    """`--cache-dir`, else PTLINT_CACHE_DIR, as an absolute folder (relative to
    the current one, as ruff's), for every configuration; {} when neither is set."""
    from ptlint.config import CACHE_DIR_ENV
    from ptlint.config_files import Inline

    value = args.cache_dir
    if value is None and not (value := os.environ.get(CACHE_DIR_ENV)):
        return {}
    folder = os.path.abspath(os.path.expanduser(value))
    return {"cache_dir": folder if args.cache_dir is not None else Inline(folder, CACHE_DIR_ENV)}


def _config_file(args: argparse.Namespace) -> tuple[Path | None, dict]:
    """`--config`, repeatable as ruff's: a configuration file (one at most), and
    KEY = VALUE settings that override every configuration file's."""
    from ptlint.config_files import inline_settings

    file, inline = None, {}
    for item in args.config or []:
        if Path(item).is_file():
            if file is not None:
                raise ConfigError(f"--config {item}: one configuration file at most "
                                  f"(--config {file} already)")
            file = Path(item)
        else:
            inline.update(inline_settings(item))
    return file, inline


def _conflict(args: argparse.Namespace, stdin: bool) -> str | None:
    if args.add_noqa and (args.fix or args.diff):
        return "--add-noqa cannot be combined with --fix or --diff"
    if args.isolated and any(Path(item).is_file() for item in args.config or []):
        return "--isolated reads no configuration file: it cannot be combined with --config FILE"
    if args.add_noqa and stdin:
        return "--add-noqa changes files: it cannot read standard input"
    if args.watch and (stdin or args.show_files or args.show_settings or args.add_noqa):
        return ("--watch lints files again as they change: it cannot be combined with "
                "standard input, --show-files, --show-settings or --add-noqa")
    return None


def cmd_check(args: argparse.Namespace) -> int:
    from ptlint.engine.job import Job

    if args.fix_only:
        args.fix = True

    stdin = args.paths == ["-"] or (bool(args.stdin_filename) and not args.paths)
    quiet = args.quiet or args.silent
    if args.stdin_filename and args.paths and args.paths != ["-"]:
        if "-" in args.paths:
            error("'-' (stdin) cannot be combined with other paths")
            return 2
        if not quiet:
            for path in args.paths:
                report.warn(f"ignoring {path} in favour of standard input (--stdin-filename)")
        stdin = True
    if (problem := _conflict(args, stdin)) is not None:
        error(problem)
        return 2
    if args.watch:
        from ptlint.watch import watch

        return watch(args.paths or ["."], lambda: _check(args, stdin, quiet))
    return _check(args, stdin, quiet)


def _check(args: argparse.Namespace, stdin: bool, quiet: bool) -> int:
    """One run of `ptlint check`: settings found, files linted, findings reported."""
    from ptlint.engine.job import Job

    try:
        config, inline = _config_file(args)
        configs = Configs.discover(_overrides(args, inline), config, isolated=args.isolated)
        settings = (configs.for_path(Path(args.stdin_filename)) if stdin and args.stdin_filename
                    else configs.default)
    except ConfigError as exc:
        error(str(exc))
        return 2
    fix = settings.fix if args.fix is None else args.fix  # the configuration's `fix = true`
    mode = "noqa" if args.add_noqa else "diff" if args.diff else "fix" if fix else "check"
    job = Job(settings, mode, unsafe=bool(settings.unsafe_fixes),  # type: ignore[arg-type]
              cache=not args.no_cache and not stdin, timings=args.timings,
              configs=None if stdin else configs)
    if stdin:
        if args.show_files or args.show_settings:
            target = args.stdin_filename or "-"
            return _show(args, [Path(target)], settings, target)
        outcome, echo = _stdin(args, job)
        return _report(args, job, [outcome], [], echo)
    if "-" in args.paths:
        error("'-' (stdin) cannot be combined with other paths")
        return 2
    from ptlint.io.files import discover

    paths = args.paths or ["."]
    try:
        found = discover(paths, configs)
    except ConfigError as exc:  # a folder's own configuration is broken
        error(str(exc))
        return 2
    if args.show_files or args.show_settings:
        for message in found.errors:
            error(message)
        target = str(found.files[0]) if found.files else paths[0]
        settings = configs.for_path(Path(target)) if found.files else configs.for_folder(target)
        code = _show(args, found.files, settings, target)
        return 2 if found.errors else code
    if not found.files and not found.errors:
        if not quiet:
            report.warn("No Python files found under the given path(s)")
        return 0
    if job.cache and (problem := _cache_problem(configs)) is not None:
        error(problem)
        return 2
    from ptlint.engine.run import run

    wanted = report.progress_wanted(settings.output_format, quiet)
    with report.progress(len(found.files), wanted, args.color) as advance:
        outcomes = run(found.files, job, args.jobs, advance)
    return _report(args, job, outcomes, found.errors)


def _cache_problem(configs: Configs) -> str | None:
    """Why a configuration's cache folder cannot be used (one ptlint did not make)."""
    from ptlint.io.cachedir import CacheError, check

    for settings in configs.all():
        try:
            check(settings)
        except CacheError as exc:
            return str(exc)
    return None


def _show(args: argparse.Namespace, files: list[Path], settings, target: str) -> int:
    if args.show_settings:
        report.show_settings(target, settings, sys.stdout)
    else:
        report.show_files(files, sys.stdout)
    return 0


def _report(args: argparse.Namespace, job: "Job", outcomes: list["Outcome"],
            errors: list[str], echo: bytes | None = None) -> int:
    """Print what the run found, in the asked format and place; the exit code."""
    errors = [*errors, *(e for out in outcomes for e in out.errors)]
    # --fix-only: what remains is neither shown nor a reason to exit 1 (ruff's flag)
    findings = [] if args.fix_only else [f for out in outcomes for f in out.findings]
    fixed = sum(out.fixed for out in outcomes)
    quiet = args.quiet or args.silent
    if not quiet:
        _notices(outcomes)
    with ExitStack() as stack:
        if echo is not None and job.mode == "fix":  # the file, fixed or as it came
            sys.stdout.flush()
            sys.stdout.buffer.write(echo)
            sys.stdout.buffer.flush()
        if job.mode == "diff":
            return _report_diff(args, outcomes, errors)
        if args.output_file is not None:
            try:
                stream: TextIO = stack.enter_context(
                    open(args.output_file, "w", encoding="utf-8", newline=""))
            except OSError as exc:
                error(f"{args.output_file}: cannot write: {exc.strerror or exc}")
                return 2
        else:
            stream = sys.stderr if echo is not None and job.mode == "fix" else sys.stdout
        if job.mode == "noqa":
            if fixed and not quiet:  # as ruff: nothing when nothing was added
                print(f"Added {report.plural(fixed, 'noqa directive')}.", file=sys.stderr)
        elif args.fix_only:
            if not quiet:
                print(f"Fixed {report.plural(fixed, 'finding')}.", file=stream)
        elif not args.silent:
            _findings(args, job, outcomes, findings, fixed, errors, stream)
    if args.timings:
        _timings(outcomes)
    if not args.silent:
        for message in errors:
            error(message)
    if errors:
        return 2
    if args.exit_non_zero_on_fix and fixed and job.mode == "fix":
        return 1
    return 0 if not findings or args.exit_zero or job.mode == "noqa" else 1


def _findings(args, job: "Job", outcomes, findings, fixed: int, errors, stream: TextIO) -> None:
    fmt = job.settings.output_format

    def fixable(f, unsafe: bool) -> bool:
        own = job.for_file(f.path)
        return f.fix is not None and own.settings.fix_allowed(f.code, f.fix.safety, unsafe=unsafe)

    if args.statistics:
        report.statistics(findings, fixable, job.unsafe, fmt, stream)
    else:
        _render(findings, outcomes, fmt, stream, errors, args.color)
    if (job.mode == "fix" and job.settings.show_fixes and fmt in TEXT_FORMATS
            and not args.quiet):
        report.fixes_made(outcomes, stream)
    if not args.quiet and fmt in TEXT_FORMATS and (
        findings or not errors or job.mode == "fix"
    ):
        report.summary(findings, fixed, fixable, job.unsafe, job.mode, stream)


def _report_diff(args: argparse.Namespace, outcomes: list["Outcome"], errors: list[str]) -> int:
    diffs = [out.diff for out in outcomes if out.diff]
    sys.stdout.write("".join(diffs))
    sys.stdout.flush()  # the diff before the summary, also where both streams are one pipe
    would = sum(out.fixed for out in outcomes if out.diff)
    if not (args.quiet or args.silent):
        print(f"Would fix {report.plural(would, 'finding')} in "
              f"{report.plural(len(diffs), 'file')}.", file=sys.stderr)
    if not args.silent:
        for message in errors:
            error(message)
    return 2 if errors else 1 if diffs else 0


def _notices(outcomes: list["Outcome"]) -> None:
    from ptlint.output import location

    for out in outcomes:
        for notice in out.notices:
            report.warn(f"{location(notice)}: {notice.message}")  # type: ignore[arg-type]


def _stdin(args: argparse.Namespace, job: "Job") -> "tuple[Outcome, bytes]":
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


def _render(findings, outcomes, fmt: str, stream: TextIO, errors: list[str], color: str) -> None:
    from ptlint.output import renderer

    if fmt == "full" and not findings:
        return  # the summary says it all
    # the formats that quote source lines or place notebook findings in the file
    sources = _sources(findings, outcomes) if fmt in ("full", "sarif", "github", "gitlab", "azure",
                                                         "rdjson") else {}
    rendered = renderer(fmt)(findings, sources, errors)
    if fmt == "full":
        report.console(stream, color).print(rendered)
    else:
        stream.write(rendered)


def _timings(outcomes) -> None:
    total: Counter[str] = Counter()
    for out in outcomes:
        total.update(out.timings)
    print("timings (seconds, summed over processes):", file=sys.stderr)
    for key, seconds in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"  {seconds:9.3f}  {key}", file=sys.stderr)
