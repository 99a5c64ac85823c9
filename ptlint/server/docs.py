"""Rule documentation for the editor: each rule's markdown (what `ptlint rule CODE`
prints) written once to a file the diagnostics and the "Show documentation"
action link to, and the hover text.

ptlint has no documentation website, and an installed package holds no
docs/rules.md; so the pages are generated from the installed rules into the user's
cache folder (`$XDG_CACHE_HOME/ptlint/rules-VERSION/PTL001.md`, or `~/.cache/...`),
where they always match the rules that produced the findings.
"""
from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

from pygls.uris import from_fs_path

from ptlint import __version__
from ptlint.docs import rule_markdown
from ptlint.rule import Rule, registry


def rule(code: str) -> type[Rule] | None:
    return registry().get(code)


def docs_folder() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(cache) / "ptlint" / f"rules-{__version__}"


@functools.cache
def doc_uri(code: str) -> str | None:
    """A `file://` URI of the rule's documentation, written if missing or out of
    date; None for an unknown code or when the file cannot be written."""
    found = rule(code)
    if found is None:
        return None
    text = rule_markdown(found)
    path = docs_folder() / f"{code}.md"
    try:
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{code}.", suffix=".md")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, path)
    except OSError:
        return None
    return from_fs_path(str(path))


def markdown(code: str) -> str | None:
    found = rule(code)
    return rule_markdown(found) if found is not None else None


def hover(code: str, name: str, message: str) -> str:
    """A finding's hover: its message and the rule's "Why is this bad?"."""
    head = f"**{code}** `{name}`: {message}"
    found = rule(code)
    why = found.doc_section("Why is this bad?") if found is not None else None
    if not why:
        return head
    return f"{head}\n\n**Why is this bad?**\n\n{why}"
