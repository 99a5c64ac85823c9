"""What `ptlint check` prints around the findings: the summary, `--statistics`,
`--show-fixes`, `--show-settings`, `--show-files`, warnings, and the progress bar.

May import: `ptlint.config`, `ptlint._catalog`, `ptlint.model`, `ptlint.output`.
Never the engine (a run answered from the cache must not load LibCST).
"""
from __future__ import annotations

import os
import sys
import threading
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, TextIO

from ptlint.config import TEXT_FORMATS, Settings

_PLURAL = {"finding": "findings", "directive": "directives", "file": "files"}


def plural(n: int, word: str) -> str:
    return f"{n} {word if n == 1 else _PLURAL.get(word, word + 's')}"


def error(message: str) -> None:
    from ptlint.io.text import printable  # a file name may hold an escape sequence

    print(f"error: {printable(message)}", file=sys.stderr)


def warn(message: str) -> None:
    from ptlint.io.text import printable

    print(f"warning: {printable(message)}", file=sys.stderr)


# -- colour ---------------------------------------------------------------------------
def console(stream: TextIO, color: str = "auto"):
    """A rich console on `stream`: colour on a terminal unless NO_COLOR says
    otherwise (`auto`), always, or never."""
    from rich.console import Console

    options: dict = {"file": stream, "soft_wrap": True, "highlight": False}
    if color == "never":
        return Console(**options, no_color=True, color_system=None)
    if color == "always":
        made = Console(**options, force_terminal=True, no_color=False)
        return made if made.color_system else Console(
            **options, force_terminal=True, no_color=False, color_system="standard")
    return Console(**options)


# -- the summary and statistics -----------------------------------------------------------
Fixable = Callable[[object, bool], bool]  # (finding, unsafe) -> may `--fix` fix it?


def summary(findings: list, fixed: int, fixable: Fixable, unsafe: bool, mode: str,
            stream: TextIO) -> None:
    n = len(findings)
    parts = []
    if mode == "fix":
        parts.append(f"Fixed {plural(fixed, 'finding')}, {n} remaining.")
    elif n:
        parts.append(f"Found {plural(n, 'finding')}.")
    else:
        parts.append("All checks passed!")
    can = sum(fixable(f, unsafe) for f in findings) if mode != "fix" else 0
    if can:
        parts.append(f"[*] {can} fixable with `ptlint --fix`.")
    hidden = 0 if unsafe else sum(fixable(f, True) for f in findings) - sum(
        fixable(f, False) for f in findings)
    if hidden:
        parts.append(f"{hidden} more fixable with `--fix --unsafe-fixes`.")
    print("\n".join(parts), file=stream)


def statistics(findings: list, fixable: Fixable, unsafe: bool, fmt: str, stream: TextIO) -> None:
    """A count per rule, the fixable ones marked `[*]` (ruff's `--statistics`)."""
    counts = Counter(f.code for f in findings)
    can = Counter(f.code for f in findings if fixable(f, unsafe))
    names = {f.code: f.name for f in findings}
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if fmt == "json":
        import json

        stream.write(json.dumps([
            {"code": c, "name": names[c], "count": n, "fixable": can[c] > 0,
             "fixable_count": can[c]} for c, n in rows], indent=2) + "\n")
        return
    width = max((len(str(n)) for _, n in rows), default=1)
    for code, n in rows:
        stream.write(f"{n:>{width}}\t{code}\t[{'*' if can[code] else ' '}] {names[code]}\n")


def fixes_made(outcomes: list, stream: TextIO) -> None:
    """`--show-fixes`: the fixes `--fix` applied, per file and rule."""
    from ptlint._catalog import RULES

    done = [out for out in outcomes if out.fixed and out.fixed_codes]
    if not done:
        return
    total = sum(out.fixed for out in done)
    lines = [f"Fixed {plural(total, 'finding')}:"]
    for out in done:
        lines.append(f"- {out.path}:")
        for code, n in sorted(out.fixed_codes.items()):
            lines.append(f"    {n} × {code} ({RULES.get(code, ('?',))[0]})")
    print("\n".join(lines) + "\n", file=stream)


# -- --show-settings, --show-files ---------------------------------------------------------
def show_settings(target: str, settings: Settings, stream: TextIO) -> None:
    """The settings a file is linted with, and where they come from."""
    import json

    from ptlint._catalog import RULES

    where = settings.config_path.resolve() if settings.config_path else "none (defaults)"
    lines = [f"Resolved settings for: {target}", f"Settings path: {where}"]
    lines += [f"  extends: {base.resolve()}" for base in settings.sources[1:]]
    lines.append("")
    lines.append(f'torch-version = "{settings.torch_version}"')
    lines.append(f"  # from {settings.torch_version_source}")
    shown = ("select", "extend_select", "ignore", "per_file_ignores", "extend_per_file_ignores",
             "fix", "fixable", "extend_fixable", "unfixable", "unsafe_fixes", "extend_safe_fixes",
             "extend_unsafe_fixes", "show_fixes", "exclude", "extend_exclude", "include",
             "extend_include", "respect_gitignore", "force_exclude", "output_format", "cache_dir")
    for name in shown:
        value = getattr(settings, name)
        key = name.replace("_", "-")
        if value is None:
            lines.append(f"{key} = (the rules on by default)")
        elif len(text := f"{key} = {json.dumps(value)}") <= 80 or not isinstance(value, list):
            lines.append(text)
        else:  # one item a line, as ruff prints long lists
            lines += [f"{key} = [", *(f"    {json.dumps(v)}," for v in value), "]"]
    lines.append(f"root = {json.dumps(str(settings.root))}")
    enabled = sorted(settings.enabled_codes)
    lines += ["", f"enabled rules ({len(enabled)}):"]
    lines += [f"  {code} {RULES[code][0]}" for code in enabled]
    print("\n".join(lines), file=stream)


def show_files(files: list[Path], stream: TextIO) -> None:
    for path in files:
        print(path, file=stream)


# -- the progress bar ------------------------------------------------------------------------
@contextmanager
def progress(total: int, enabled: bool, color: str = "auto") -> Iterator[Callable[[int], None]]:
    """A function to call with the number of files done. A rich progress bar on
    stderr appears when the run has lasted `PTLINT_PROGRESS_DELAY` seconds (1 by
    default), and is erased at the end."""
    if not enabled or total == 0:
        yield lambda n: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    try:
        delay = float(os.environ.get("PTLINT_PROGRESS_DELAY", "1"))
    except ValueError:
        delay = 1.0
    bar = Progress(TextColumn("linting"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=console(sys.stderr, color), transient=True)
    task = bar.add_task("linting", total=total)
    lock = threading.Lock()
    state = {"started": False, "over": False}

    def start() -> None:
        with lock:
            if not state["over"]:
                bar.start()
                state["started"] = True

    timer = threading.Timer(delay, start)
    timer.daemon = True
    timer.start()
    try:
        yield lambda n: bar.advance(task, n)
    finally:
        timer.cancel()
        with lock:
            state["over"] = True
            if state["started"]:
                bar.stop()


def progress_wanted(fmt: str, quiet: bool) -> bool:
    """A progress bar is for people: on a terminal, not in CI, not with a
    machine-readable format."""
    return (not quiet and fmt in TEXT_FORMATS and not os.environ.get("CI")
            and sys.stderr.isatty())
