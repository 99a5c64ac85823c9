"""Linting one snapshot (a file or a notebook) with the settings of the nearest
configuration, and applying fixes to it. Runs in the server's lint thread: it
touches nothing the event loop owns."""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ptlint.config import ConfigError, Settings
from ptlint.config_files import find_config, load_config, with_target
from ptlint.io.text import one_line
from ptlint.model import Finding
from ptlint.server.documents import Snapshot

# Initialization options that may override the configuration, and the Settings
# field each one sets.
OVERRIDES = {"select": "select", "extend-select": "extend_select", "ignore": "ignore",
             "unsafe-fixes": "unsafe_fixes"}


class Configs:
    """The settings of the nearest `pyproject.toml` / `ptlint.toml` of each
    document, found as the command line finds them, with the initialization
    options' overrides. A configuration is read again when its file, or a file it
    extends, changes."""

    def __init__(self, overrides: dict[str, Any], folders: list[Path]) -> None:
        self.overrides = overrides
        self.folders = folders
        self._cache: dict[Path | None, tuple[tuple, Settings]] = {}  # config -> (stamps, it)
        self._targets: dict = {}  # the torch version of each folder's project (config)
        self._variants: dict = {}
        self._lock = threading.Lock()

    def anchor(self, path: Path | None) -> Path:
        """Where discovery starts: the file, or for a document that is not a file,
        the first workspace folder."""
        if path is not None:
            return path
        return self.folders[0] if self.folders else Path.cwd()

    def settings_for(self, path: Path | None) -> Settings:
        """Raises ConfigError for a configuration the user must correct."""
        with self._lock:  # the torch version of the project nearest to the document
            anchor = self.anchor(path)
            return with_target(self._settings_for(anchor),
                               anchor if anchor.is_dir() else anchor.parent,
                               self._targets, self._variants)

    def _settings_for(self, anchor: Path) -> Settings:
        config = find_config(anchor)
        cached = self._cache.get(config)
        if cached is not None and cached[0] == _stamps(cached[1].sources):
            return cached[1]
        settings = load_config(config, self.overrides)
        self._cache[config] = (_stamps(settings.sources), settings)
        return settings

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self._targets.clear()
            self._variants.clear()


def check_overrides(options: Any) -> tuple[dict[str, Any], list[str]]:
    """The overrides in the initialization options, and a message for each one
    that is not understood."""
    if options is None:
        return {}, []
    if not isinstance(options, dict):
        return {}, ["initializationOptions: expected an object"]
    overrides, problems = {}, []
    for key, value in options.items():
        if key not in OVERRIDES:
            problems.append(f"initializationOptions: unknown key {key!r} "
                            f"(known: {', '.join(OVERRIDES)})")
            continue
        overrides[OVERRIDES[key]] = value
    try:
        load_config(None, overrides)
    except ConfigError as exc:
        problems.append(f"initializationOptions: {exc}")
        return {}, problems
    return overrides, problems


@dataclass
class Item:
    """One finding as shown: in the coordinates of its file or cell (`uri`), and
    the finding its fix is applied from (the same one, or for a notebook, the
    finding in the coordinates of the joined module)."""

    uri: str
    finding: Finding
    source: Finding | None


@dataclass
class Linted:
    snapshot: Snapshot
    settings: Settings | None
    items: list[Item] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # internal errors, one line each
    config_error: str | None = None
    cells: Any = None  # a notebook's CellLint

    @property
    def generation(self) -> int:
        return self.snapshot.generation

    def texts(self) -> dict[str, str]:
        """The text of each document this lint saw (a file, or the code cells), by URI."""
        if self.snapshot.cells is None:
            return {self.snapshot.uri: self.snapshot.text}
        return {uri: text for _, uri, text in self.snapshot.cells}


def path_name(snapshot: Snapshot) -> str:
    """The path findings are reported under (per-file-ignores match it)."""
    return str(snapshot.path) if snapshot.path is not None else snapshot.uri


def _stamps(paths: tuple[Path, ...]) -> tuple:
    """What tells that the configuration files `paths` changed."""
    found: list[tuple] = []
    for path in paths:
        try:
            st = os.stat(path)
            found.append((str(path), st.st_mtime_ns, st.st_size))
        except OSError:
            found.append((str(path),))
    return tuple(found)


def lint(snapshot: Snapshot, configs: Configs, parser: Any = None) -> Linted:
    """Never raises: a broken configuration or an internal error is in the result.
    `parser`: the document's `Reparser` (a file, not a notebook)."""
    try:
        settings = configs.settings_for(snapshot.path)
    except ConfigError as exc:
        return Linted(snapshot, None, config_error=str(exc))
    try:
        return _lint(snapshot, settings, parser)
    except Exception as exc:  # noqa: BLE001 - the server must outlive a bug in the engine
        return Linted(snapshot, settings,
                      errors=[f"{path_name(snapshot)}: internal error: {one_line(exc)}"])


def _lint(snapshot: Snapshot, settings: Settings, parser: Any) -> Linted:
    from ptlint.engine.lint import lint_text
    from ptlint.engine.notebook import lint_cells

    name = path_name(snapshot)
    if snapshot.cells is None:
        result = lint_text(snapshot.text, name, settings, parser=parser)
        items = [Item(snapshot.uri, f, f) for f in result.findings]
        return Linted(snapshot, settings, items, result.errors)
    uris = {index: uri for index, uri, _ in snapshot.cells}
    cells = lint_cells([(index, text) for index, _, text in snapshot.cells], name, settings)
    items = [Item(uris[shown.cell], shown, source) for shown, source in cells.pairs()
             if shown.cell in uris]
    return Linted(snapshot, settings, items, cells.result.errors, cells=cells)
