"""The `ptlint` command line."""
from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Sequence

from ptlint import __version__
from ptlint.config import OUTPUT_FORMATS, merge_globs
from ptlint.report import error

COMMANDS = ("check", "rule", "rules", "clean", "verify", "server", "version")


def _codes(text: str) -> list[str]:
    """A comma-separated list of rule selectors; an empty one is a mistake."""
    items = [c.strip() for c in text.split(",")]
    if not any(items) or not all(items):
        raise argparse.ArgumentTypeError(f"empty rule selector in {text!r}")
    return items


def _pairs(text: str) -> dict[str, list[str]]:
    """`GLOB:RULES` pairs, comma-separated (`tests/*:PTL101,PTL113,*.ipynb:PTL1`):
    an item without a colon adds a rule to the glob before it."""
    out: dict[str, list[str]] = {}
    glob = None
    for item in (i.strip() for i in text.split(",")):
        if ":" in item:
            glob, _, item = item.rpartition(":")
            glob = glob.strip()
            item = item.strip()
        if not glob or not item:
            raise argparse.ArgumentTypeError(f"expected GLOB:RULES pairs, got {text!r}")
        out.setdefault(glob, []).append(item)
    return out


class _Merge(argparse.Action):
    """Repeated `GLOB:RULES` options add up."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, merge_globs(getattr(namespace, self.dest) or {}, values))


def _globs(text: str) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()]


SELECTORS = ("codes (PTL102), prefixes (PTL1), rule names (data-parallel) "
             "or ALL, comma-separated")


def _check_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "check", help="lint files and folders (the default command)",
        description="Lint files and folders. Wherever options name rules (--select, "
                    "--ignore, ...), a code, a prefix or a rule name works; `# noqa:` "
                    "takes codes or rule names, as in ruff.")
    p.add_argument("paths", nargs="*", default=None,
                   help="files or folders (default: .); '-' reads standard input")
    fix = p.add_argument_group("fixing")
    fix.add_argument("--fix", action="store_true", default=None,
                     help="apply safe fixes in place")
    fix.add_argument("--no-fix", dest="fix", action="store_false",
                     help="do not fix, whatever the configuration says (`fix = true`)")
    fix.add_argument("--fix-only", action="store_true",
                     help="apply fixes, and neither report nor exit 1 for the findings that "
                          "remain (implies --fix)")
    fix.add_argument("--unsafe-fixes", action="store_true", default=None,
                     help="also apply (with --fix) or show unsafe fixes")
    fix.add_argument("--no-unsafe-fixes", dest="unsafe_fixes", action="store_false",
                     help="never apply unsafe fixes, whatever the configuration says")
    fix.add_argument("--diff", action="store_true",
                     help="print the diff --fix would write; change nothing")
    fix.add_argument("--show-fixes", action="store_true", default=None,
                     help="with --fix: list the fixes applied, per file and rule")
    fix.add_argument("--no-show-fixes", dest="show_fixes", action="store_false",
                     help="do not, whatever the configuration says (`show-fixes = true`)")
    fix.add_argument("--exit-non-zero-on-fix", action="store_true",
                     help="exit 1 when --fix changed a file, even if no finding remains")
    fix.add_argument("--add-noqa", action="store_true",
                     help="add `# noqa: CODES` to every line with a finding (existing "
                          "comments kept; notebooks too), to adopt ptlint on existing code")
    sel = p.add_argument_group("rule selection", f"Each takes {SELECTORS}.")
    for flag, what in (("select", "the rules to run (replaces the configuration's)"),
                       ("extend-select", "rules to run besides the selected ones"),
                       ("ignore", "rules not to run"),
                       ("fixable", "the rules whose fixes may be applied (default ALL)"),
                       ("extend-fixable", "rules whose fixes may be applied besides those"),
                       ("unfixable", "rules whose fixes are never applied")):
        sel.add_argument(f"--{flag}", type=_codes, action="extend", default=None,
                         metavar="RULES", help=what)
    for flag, what in (("per-file-ignores", "rules not to run on the files a glob matches, "
                                            "e.g. 'tests/*:PTL101,PTL113' (replaces the "
                                            "configuration's)"),
                       ("extend-per-file-ignores", "the same, besides the configuration's")):
        sel.add_argument(f"--{flag}", type=_pairs, action=_Merge, default=None,
                         metavar="GLOB:RULES", help=what)
    sel.add_argument("--ignore-noqa", action="store_true",
                     help="disregard every `# noqa` comment (`# ptlint: noqa` too)")
    out = p.add_argument_group("output")
    out.add_argument("--output-format", choices=OUTPUT_FORMATS, metavar="FORMAT",
                     help=f"how findings are written: {', '.join(OUTPUT_FORMATS)} "
                          "(default: full)")
    out.add_argument("-o", "--output-file", type=Path, metavar="FILE",
                     help="write the report to FILE instead of standard output")
    out.add_argument("--statistics", action="store_true",
                     help="a count per rule (fixable ones marked [*]) and the total")
    out.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")
    out.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                     help="colour the findings: on a terminal (auto, honours NO_COLOR), "
                          "always or never")
    out.add_argument("-q", "--quiet", action="store_true",
                     help="print findings and errors only: no summary, warnings or progress")
    out.add_argument("-s", "--silent", action="store_true",
                     help="print nothing (the exit code tells); --diff and '- --fix' still "
                          "print their result")
    out.add_argument("--show-settings", action="store_true",
                     help="print the settings the first file is linted with, and where "
                          "they come from (torch version included); lint nothing")
    out.add_argument("--show-files", action="store_true",
                     help="print the files that would be linted; lint nothing")
    out.add_argument("--timings", action="store_true", help="time each phase and rule")
    run = p.add_argument_group("run")
    run.add_argument("--config", action="append", metavar="FILE|SETTING",
                     help="use this pyproject.toml or ptlint.toml for every file (default: "
                          "each file's nearest one); or a setting that overrides every "
                          "file's, as TOML: --config 'lint.select = [\"PTL101\"]' "
                          "(repeatable)")
    run.add_argument("--torch-version", metavar="VERSION",
                     help="target torch version, e.g. 2.4 (default: the lowest version the "
                          "project's requirements admit, else the installed torch)")
    run.add_argument("--stdin-filename", metavar="PATH",
                     help="read standard input (without '-' too) and report it as PATH")
    run.add_argument("--isolated", action="store_true",
                     help="read no configuration file: defaults and these options only")
    run.add_argument("--exclude", type=_globs, action="extend", default=None,
                     metavar="GLOBS", help="files and folders not to lint, replacing the "
                                           "configuration's and the defaults (comma-separated)")
    run.add_argument("--extend-exclude", type=_globs, action="extend", default=None,
                     metavar="GLOBS", help="more files and folders not to lint (comma-separated)")
    run.add_argument("--extend-include", type=_globs, action="extend", default=None,
                     metavar="GLOBS", help="more file patterns to lint, e.g. '*.pyw'")
    run.add_argument("--force-exclude", action="store_true", default=None,
                     help="apply exclude rules to files named on the command line too "
                          "(for pre-commit, which passes every file by name)")
    run.add_argument("--respect-gitignore", action="store_true", default=None,
                     help="skip what .gitignore ignores (the default: `respect-gitignore`)")
    run.add_argument("--no-respect-gitignore", dest="respect_gitignore", action="store_false",
                     help="lint what .gitignore ignores too")
    run.add_argument("-j", "--jobs", type=int, default=None, help="processes (default: all cores)")
    run.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    run.add_argument("--cache-dir", metavar="PATH",
                     help="the cache folder, anywhere, for every configuration (default: "
                          "each one's `cache-dir`; env: PTLINT_CACHE_DIR)")
    run.add_argument("-w", "--watch", action="store_true",
                     help="lint again whenever a file under the paths changes (Ctrl-C stops)")
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ptlint", description="A linter and autofixer for PyTorch code.",
        epilog="`ptlint PATH` is short for `ptlint check PATH`; `ptlint check --help` "
               "describes its options.",
    )
    parser.add_argument("--version", action="version", version=f"ptlint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _check_parser(sub)
    rule = sub.add_parser("rule", help="print a rule's documentation")
    rule.add_argument("code", nargs="?", help="a code (PTL001) or name (loss-kept-with-graph)")
    rule.add_argument("--all", action="store_true", help="every rule's documentation")
    rule.add_argument("--output-format", choices=("text", "json"), default="text",
                      help="Markdown text, or JSON (code, name, summary, fix, default, "
                           "explanation)")
    rules = sub.add_parser("rules", help="list every rule")
    rules.add_argument("--output-format", choices=("full", "json"), default="full",
                       help="a table (full) or JSON")
    clean = sub.add_parser("clean", help="remove the result cache")
    clean.add_argument("--config", type=Path, metavar="FILE",
                       help="the configuration whose cache to remove")
    clean.add_argument("--cache-dir", metavar="PATH",
                       help="the cache folder to empty (env: PTLINT_CACHE_DIR)")
    from ptlint.verify import command as verify  # torch-free: torch only when it runs

    verify.add_arguments(sub.add_parser(
        "verify", help="run rules' bad and fixed programs: check, time, measure memory"))
    sub.add_parser("server", help="a language server over stdio, for editors "
                                  "(needs ptlint's server extra)")
    version = sub.add_parser("version", help="print ptlint's version (as --version)")
    version.add_argument("--output-format", choices=("text", "json"), default="text",
                         help="`ptlint X.Y.Z`, or JSON: {\"version\": \"X.Y.Z\"}")
    return parser


def _unknown_command(word: str) -> str | None:
    """The command a first argument that is no path was probably meant to be."""
    if word.startswith("-") or word == "-" or os.path.lexists(word):
        return None
    import difflib  # (imported here: about 6 ms of every run otherwise)

    close = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.6)
    return close[0] if close else None


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse, and answer an unknown option with the command's usage and the
    nearest option (`--fixx`: did you mean `--fix`?)."""
    args, extra = parser.parse_known_args(argv)
    if not extra:
        return args
    command = parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and args.command in action.choices:
            command = action.choices[args.command]
    options = [o for a in command._actions for o in a.option_strings]
    unknown = next((e for e in extra if e.startswith("-")), extra[0])
    import difflib

    close = difflib.get_close_matches(unknown.split("=")[0], options, n=1, cutoff=0.6)
    tip = f"; did you mean {close[0]!r}?" if close else ""
    command.print_usage(sys.stderr)
    command.exit(2, f"{command.prog}: error: unrecognized argument {unknown!r}{tip}\n"
                    f"`{command.prog} --help` describes every option.\n")
    raise AssertionError  # exit() raised SystemExit


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version"):
        meant = _unknown_command(argv[0])
        if meant is not None:
            error(f"unknown command {argv[0]!r}; did you mean {meant!r}? "
                  "(`ptlint --help` lists the commands)")
            return 2
        argv.insert(0, "check")
    elif not argv:
        argv = ["check"]
    signal.signal(signal.SIGTERM, _terminate)
    if hasattr(signal, "SIGHUP"):  # the terminal was closed: stop as for SIGTERM
        signal.signal(signal.SIGHUP, _terminate)
    _tolerant_streams()
    try:
        from ptlint.verify.command import split_script_args

        argv, script_args = split_script_args(argv)
        args = _parse(build_parser(), argv)
        args.script_args = script_args
        if args.command == "rule":
            return cmd_rule(args.code, args.all, args.output_format)
        if args.command == "rules":
            return cmd_rules(args.output_format)
        if args.command == "version":
            import json

            print(json.dumps({"version": __version__}) if args.output_format == "json"
                  else f"ptlint {__version__}")
            return 0
        if args.command == "verify":
            from ptlint.verify import command as verify

            return verify.main(args)
        if args.command == "server":
            from ptlint.server import main as serve

            return serve()
        try:
            os.getcwd()
        except OSError:
            error("the current folder no longer exists (was it deleted?); "
                  "run ptlint from an existing folder")
            return 2
        if args.command == "clean":
            return cmd_clean(args)
        from ptlint.check import cmd_check

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


# -- ptlint rule / rules / clean ------------------------------------------------
def _find_rule(code: str):
    from ptlint.rule import registry

    for rule in registry().values():
        if code.upper() == rule.code or code == rule.name:
            return rule
    return None


def cmd_rule(code: str | None, every: bool, fmt: str) -> int:
    """`ptlint rule CODE`, or `--all` of them, as Markdown or JSON (as `ruff rule`)."""
    import json

    from ptlint.docs import fix_label, rule_markdown
    from ptlint.rule import registry

    if every == (code is not None):
        error("name one rule, or --all")
        return 2
    if not every and (code or "").strip().upper() in ("PTL000", "SYNTAX-ERROR"):
        from ptlint.docs import SYNTAX_ERROR_DOC

        print(json.dumps({"code": "PTL000", "name": "syntax-error", "summary": "Python cannot "
                          "parse the file", "fix": "safe", "default": True,
                          "explanation": SYNTAX_ERROR_DOC}, indent=2)
              if fmt == "json" else SYNTAX_ERROR_DOC, end="" if fmt != "json" else "\n")
        return 0
    if every:
        rules = list(registry().values())
    else:
        found = _find_rule(code or "")
        if found is None:
            error(f"unknown rule {code!r}; `ptlint rules` lists them")
            return 2
        rules = [found]
    if fmt == "json":
        docs = [{"code": r.code, "name": r.name, "summary": r.summary(), "fix": fix_label(r),
                 "default": r.default_enabled, "explanation": rule_markdown(r)} for r in rules]
        print(json.dumps(docs if every else docs[0], indent=2))
        return 0
    print("\n\n".join(rule_markdown(r) for r in rules))
    return 0


def cmd_rules(fmt: str) -> int:
    import json

    from ptlint.docs import fix_label
    from ptlint.rule import registry

    rules = list(registry().values())
    if fmt == "json":
        print(json.dumps([{
            "code": r.code, "name": r.name, "message": r.description(), "fix": fix_label(r),
            "default": r.default_enabled, "summary": r.summary(), "url": None,
        } for r in rules], indent=2))
        return 0
    import shutil

    rows = [(r.code, r.name, fix_label(r), "on" if r.default_enabled else "off",
             r.description().replace("`", "")) for r in rules]
    print("\n".join(_rules_table(rows, shutil.get_terminal_size().columns)))
    return 0


def _rules_table(rows: list[tuple[str, ...]], width: int) -> list[str]:
    """Code, name, fix and default in columns, then what the rule finds: wrapped in
    a last column where that has room, else on the lines below (80 columns)."""
    import textwrap

    header = ("code", "name", "fix", "default")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
    column = sum(widths) + 2 * len(widths)  # where a last column would start
    inline = width - column >= 40
    indent = column if inline else 8

    def left(cells) -> str:
        return "  ".join(cell.ljust(w) for cell, w in zip(cells, widths))

    lines = [left(header) + "  finds" if inline else left(header).rstrip()]
    for *cells, finds in rows:
        wrapped = textwrap.wrap(finds, width - indent, break_on_hyphens=False)
        if inline:
            lines.append(left(cells) + "  " + wrapped.pop(0))
        else:
            lines.append(left(cells).rstrip())
        lines += [" " * indent + text for text in wrapped]
    return lines


def cmd_clean(args: argparse.Namespace) -> int:
    from ptlint.check import cache_dir_override
    from ptlint.config import ConfigError
    from ptlint.config_files import find_config, load_config
    from ptlint.io.cachedir import CacheError, cache_folder, clean

    try:
        settings = load_config(args.config or find_config(Path.cwd()), cache_dir_override(args))
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


if __name__ == "__main__":
    sys.exit(main())
