"""Configuration files: the nearest `ptlint.toml` or `pyproject.toml` with a
`[tool.ptlint]` table for each folder (as ruff's hierarchical discovery), the
files they `extend`, `--config 'KEY = VALUE'` overrides, and the target torch
version of each folder's project (`with_target`). What the settings mean, and
their checks, are in `ptlint.config`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ptlint.config import (ConfigError, Settings, assign, merge_globs, real_folder, tomllib,
                           validate)

_KEYS = {f.name.replace("_", "-"): f.name for f in fields(Settings)
         if f.name not in ("root", "config_path", "sources", "torch_version_source",
                           "torch_version_explicit", "ignore_noqa", "cache_dir_explicit")}


def _tool_table(data: dict, path: Path) -> dict | None:
    """`[tool.ptlint]` of a parsed pyproject.toml (None when absent)."""
    tool = data.get("tool")
    if tool is None:
        return None
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: `tool` must be a table, not {type(tool).__name__}")
    table = tool.get("ptlint")
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: `tool.ptlint` must be a table, not {type(table).__name__}")
    return table


# The keys that may also sit in a `lint` table (`[tool.ptlint.lint]`), as in ruff's
# `[tool.ruff.lint]`.
_LINT_KEYS = frozenset({"select", "extend-select", "ignore", "per-file-ignores",
                        "extend-per-file-ignores", "fixable", "extend-fixable", "unfixable",
                        "extend-safe-fixes", "extend-unsafe-fixes"})


def _with_lint_table(table: dict, path: Path | str, where: str = "`lint`") -> dict:
    """`table` with the keys of its `lint` table (named `where` in messages) moved up to it."""
    lint = table.get("lint")
    if lint is None:
        return table
    if not isinstance(lint, dict):
        raise ConfigError(f"{path}: {where} must be a table, not {type(lint).__name__}")
    merged = {k: v for k, v in table.items() if k != "lint"}
    for key, value in lint.items():
        if key not in _LINT_KEYS:
            raise ConfigError(f"{path}: unknown key {key!r} in {where} (it takes "
                              f"{', '.join(sorted(_LINT_KEYS))})")
        if key in merged:
            raise ConfigError(f"{path}: {key!r} is set both in {where} and above it")
        merged[key] = value
    return merged


def config_in(folder: Path) -> Path | None:
    """The folder's `ptlint.toml`, or its `pyproject.toml` if it has a `[tool.ptlint]`."""
    candidate = folder / "ptlint.toml"
    if candidate.is_file():
        return candidate
    candidate = folder / "pyproject.toml"
    if candidate.is_file():
        try:
            data = tomllib.loads(candidate.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError):
            return candidate  # let load_config report it
        if _tool_table(data, candidate) is not None:
            return candidate
    return None


def find_config(start: Path) -> Path | None:
    """The nearest `ptlint.toml`, or `pyproject.toml` with a `[tool.ptlint]` table."""
    start = start.resolve()
    for folder in [start, *start.parents] if start.is_dir() else list(start.parents):
        found = config_in(folder)
        if found is not None:
            return found
    return None


def inline_settings(text: str) -> dict[str, Any]:
    """`--config 'KEY = VALUE'`: settings written as in `ptlint.toml` (`lint.select =
    [...]` too), by the name of their `Settings` field; ConfigError for anything else."""
    source = f"--config {text!r}"
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: no such configuration file, nor a KEY = VALUE "
                          f"setting ({exc})") from None
    if not table:
        raise ConfigError(f"{source}: no such configuration file, nor a KEY = VALUE setting")
    found: dict[str, Any] = {}
    for key, value in _with_lint_table(table, source).items():
        if key not in _KEYS:
            raise ConfigError(f"{source}: unknown key {key!r}")
        assign(Settings(), _KEYS[key], value, f"{source}: {key}")  # its type checked here
        found[_KEYS[key]] = Inline(value, source)
    return found


@dataclass(frozen=True)
class Inline:
    """A command-line override given as `--config 'KEY = VALUE'` (`where`), not
    as an option: `--show-settings` names it as the source."""
    value: Any
    where: str


def load_config(path: Path | None, overrides: dict[str, Any] | None = None) -> Settings:
    """Settings from `path` (and the files it extends, or defaults), then
    command-line overrides."""
    settings = Settings()
    if path is not None:
        sources: list[Path] = []
        for name, (value, where) in _file_settings(path, sources).items():
            assign(settings, name, value, where)
        settings.root = path.parent.resolve()
        settings.config_path = path
        settings.sources = tuple(sources)
    for name, value in (overrides or {}).items():
        where = f"--{name.replace('_', '-')}"
        if isinstance(value, Inline):
            value, where = value.value, value.where
        if value is None:
            continue
        if name in ("extend_exclude", "extend_include", "extend_fixable"):  # added to the file's
            value = [*getattr(settings, name), *value]
        elif name == "extend_per_file_ignores":
            value = merge_globs(settings.extend_per_file_ignores, value)
        assign(settings, name, value, where)
    if settings.torch_version is None:
        from ptlint.target import target_version

        settings.torch_version, settings.torch_version_source = target_version(settings.root)
    validate(settings)
    return settings


# The keys whose values add up along an `extend` chain, as in ruff (the others replace).
_ADDED = frozenset({"extend_exclude", "extend_include", "extend_fixable", "extend_safe_fixes",
                    "extend_unsafe_fixes", "extend_per_file_ignores"})
_SELECTION = ("select", "extend_select", "ignore")


def _file_settings(path: Path, sources: list[Path]) -> dict[str, tuple[Any, str]]:
    """The settings a configuration file makes, by field name, each with where it
    is set (`FILE: key`): those of the file it `extend`s first, its own on top.
    `sources` gets every file read, the base last."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    # ptlint.toml holds the settings at its top, pyproject.toml in [tool.ptlint],
    # a file of another name in [tool.ptlint] if it has a `tool` table, else at its top
    toml = path.name == "ptlint.toml" or path.name != "pyproject.toml" and "tool" not in data
    table = data if toml else _tool_table(data, path) or {}
    table = _with_lint_table(table, path, "`lint`" if toml else "`tool.ptlint.lint`")
    sources.append(path)
    found: dict[str, tuple[Any, str]] = {}
    own: dict[str, tuple[Any, str]] = {}
    for key, value in table.items():
        if key == "extend":
            found = _file_settings(_extended(path, value, sources), sources)
            continue
        if key not in _KEYS:
            raise ConfigError(f"{path}: unknown key {key!r}" if toml else
                              f"{path}: unknown key {key!r} in [tool.ptlint]")
        where = f"{path}: {key}"
        assign(Settings(), _KEYS[key], value, where)  # its type checked here
        own[_KEYS[key]] = (value, where)
    if "select" in own:  # a selection of its own: the base's is left behind
        found = {k: v for k, v in found.items() if k not in _SELECTION}
    elif own.keys() & {"extend_select", "ignore"} and found.keys() & set(_SELECTION):
        found = _selection_made(found)
    for name, (value, where) in own.items():
        if name in _ADDED and name in found:
            base = found[name][0]
            value = merge_globs(base, value) if isinstance(value, dict) else [*base, *value]
        found[name] = (value, where)
    return found


def _extended(path: Path, value: Any, sources: list[Path]) -> Path:
    """The file that `extend = value` in `path` names (relative to its folder;
    `~` and environment variables expanded, as in ruff)."""
    where = f"{path}: extend"
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: expected the path of a configuration file")
    base = path.parent / os.path.expandvars(os.path.expanduser(value))
    if not base.is_file():
        raise ConfigError(f"{where}: no such configuration file {value!r}")
    if any(os.path.samefile(base, seen) for seen in sources):
        chain = " -> ".join(os.path.normpath(p) for p in [*sources, base])
        raise ConfigError(f"{where}: the files extend each other in a circle ({chain})")
    return base


def _selection_made(found: dict[str, tuple[Any, str]]) -> dict[str, tuple[Any, str]]:
    """`found` with its rule selection written out as the codes it selects, so
    that a file extending it can add to it and take from it, as in ruff (an
    `extend-select` there turns on a rule the base ignores)."""
    base = Settings(**{k: found[k][0] for k in _SELECTION if k in found})
    where = next(found[k][1] for k in _SELECTION if k in found)
    try:
        codes = sorted(base.enabled_codes)
        syntax = base._syntax_errors
    except ConfigError as exc:
        raise ConfigError(f"{where.rsplit(': ', 1)[0]}: {exc}") from None
    kept = {k: v for k, v in found.items() if k not in _SELECTION}
    kept["select"] = (codes, where)
    if not syntax:  # PTL000 (syntax errors) is on unless ignored
        kept["ignore"] = (["PTL000"], where)
    return kept


class Configs:
    """Each file's settings: those of its nearest configuration file, as ruff's
    hierarchical discovery does (a `pyproject.toml` without `[tool.ptlint]` is not
    one), with the command line's overrides. A file under no configuration file
    gets `default`: the settings of the working directory's nearest one. With
    `--config`, every file gets that one. Either way, unless `torch-version` is
    set, the target torch version is that of the project nearest to the file."""

    def __init__(self, default: Settings, overrides: dict[str, Any] | None = None, *,
                 hierarchical: bool = False) -> None:
        self.default = default
        self.overrides = overrides or {}
        self.hierarchical = hierarchical
        self._loaded: dict[Path, Settings] = {}
        self._folders: dict[str, Path | None] = {}
        self._targets: dict = {}  # folder -> its project's torch requirement (see target)
        self._variants: dict = {}  # (settings, target) -> the settings with that target
        if default.config_path is not None:
            self._loaded[default.config_path.resolve()] = default

    @classmethod
    def discover(cls, overrides: dict[str, Any], config: Path | None = None,
                 start: Path | None = None, *, isolated: bool = False) -> "Configs":
        if isolated:  # no configuration file: defaults and the command line
            return cls(load_config(None, overrides), overrides)
        if config is not None:
            if not config.is_file():
                raise ConfigError(f"{config}: no such config file")
            return cls(load_config(config, overrides), overrides)
        default = load_config(find_config(start or Path.cwd()), overrides)
        return cls(default, overrides, hierarchical=True)

    def for_path(self, path: Path) -> Settings:
        return self.for_folder(path.parent)

    def for_folder(self, folder: Path | str) -> Settings:
        real = real_folder(str(folder))
        path = self._nearest(real) if self.hierarchical else None
        settings = self.default if path is None else self._loaded.get(path)
        if settings is None:
            settings = self._loaded[path] = load_config(path, self.overrides)
        return with_target(settings, Path(real), self._targets, self._variants)

    def _nearest(self, folder: str) -> Path | None:
        """The configuration file nearest to a resolved folder (each folder asked once)."""
        if folder in self._folders:
            return self._folders[folder]
        found = config_in(Path(folder))
        if found is not None:
            found = found.resolve()
        else:
            parent = os.path.dirname(folder)
            found = self._nearest(parent) if parent != folder else None
        self._folders[folder] = found
        return found

    def all(self) -> list[Settings]:
        """The settings loaded so far (the default first)."""
        return [self.default, *(s for s in self._loaded.values() if s is not self.default)]


def with_target(settings: Settings, folder: Path, targets: dict, variants: dict) -> Settings:
    """`settings` for the files of `folder`: unless `torch-version` is set, with
    the torch version the project nearest to the folder declares (see target).
    `targets` and `variants` keep what was found, for the next folders."""
    if settings.torch_version_explicit:
        return settings
    from ptlint.target import target_version

    found = target_version(folder, targets)
    if found == (settings.torch_version, settings.torch_version_source):
        return settings
    key = (id(settings), found)
    kept = variants.get(key)
    if kept is None or kept[0] is not settings:  # (an id may be reused once freed)
        kept = variants[key] = (settings, replace(settings, torch_version=found[0],
                                                  torch_version_source=found[1]))
    return kept[1]
