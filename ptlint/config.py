"""The settings of a run: their fields and defaults, rule selection (which codes
run on which file, which fixes apply) and the checks of every value. Reading them
from configuration files is `ptlint.config_files`."""
from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ptlint._catalog import LOAD, RULES as CATALOG
from ptlint.model import Safety

# (read by `config_files` and `target`)
if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, from PyPI (a dependency on Python 3.10 only)
    import tomli as tomllib

if TYPE_CHECKING:  # pathspec is imported when a glob is matched, not for files named outright
    import pathspec

    from ptlint.rule import Rule

DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", ".mypy_cache", ".pytest_cache",
    ".ruff_cache", ".ptlint_cache", "build", "dist", "__pycache__", "node_modules",
    "site-packages", ".ipynb_checkpoints", ".eggs", "*.egg-info",
)
DEFAULT_INCLUDE = ("*.py", "*.pyi", "*.ipynb")
OUTPUT_FORMATS = ("full", "concise", "grouped", "json", "json-lines", "sarif", "github", "gitlab",
                  "junit", "pylint", "azure", "rdjson")
# the formats written for people: they get the summary, --show-fixes and a progress bar
TEXT_FORMATS = ("full", "concise", "grouped")
SAFETY_KEYS = {"safe": Safety.SAFE, "unsafe": Safety.UNSAFE}


def needed_codes(text: str, codes: Sequence[str]) -> list[str]:
    """The rules of `codes` whose `requires_text` (from the catalog) the text
    contains: the others need no parse, and are not even imported."""
    present: dict[str, bool] = {}  # rules share their texts: each is looked for once

    def has(needle: str) -> bool:
        found = present.get(needle)
        if found is None:
            found = present[needle] = needle in text
        return found

    return [c for c in codes if not LOAD[c][1] or any(map(has, LOAD[c][1]))]


def merge_globs(*tables: dict[str, list[str]]) -> dict[str, list[str]]:
    """Tables of glob = [codes] merged, the codes of a glob in several added up."""
    merged: dict[str, list[str]] = {}
    for table in tables:
        for glob, codes in table.items():
            merged[glob] = [*merged.get(glob, []), *codes]
    return merged


# The environment variable that sets the cache folder, as RUFF_CACHE_DIR does ruff's.
CACHE_DIR_ENV = "PTLINT_CACHE_DIR"


class ConfigError(Exception):
    """A configuration the user must correct; the message names the file and key."""


@dataclass
class Settings:
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    extend_per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extend_exclude: list[str] = field(default_factory=list)
    include: list[str] = field(default_factory=lambda: list(DEFAULT_INCLUDE))
    extend_include: list[str] = field(default_factory=list)
    fixable: list[str] = field(default_factory=lambda: ["ALL"])
    extend_fixable: list[str] = field(default_factory=list)
    unfixable: list[str] = field(default_factory=list)
    show_fixes: bool = False  # with --fix, list the fixes applied (--no-show-fixes: do not)
    fix: bool = False  # `fix = true`: a run fixes as with --fix (--no-fix: it does not)
    unsafe_fixes: bool = False
    extend_safe_fixes: list[str] = field(default_factory=list)
    extend_unsafe_fixes: list[str] = field(default_factory=list)
    output_format: str = "full"
    torch_version: Any = None  # packaging Version; None: inferred (see ptlint.target)
    torch_version_source: str = ""  # where torch_version comes from, in words
    torch_version_explicit: bool = False  # set by torch-version or --torch-version
    respect_gitignore: bool = True
    force_exclude: bool = False  # apply excludes to files named on the command line too
    ignore_noqa: bool = False  # --ignore-noqa: every `# noqa` comment is disregarded
    cache_dir: str = ".ptlint_cache"
    cache_dir_explicit: bool = False  # set by --cache-dir or PTLINT_CACHE_DIR: any folder
    root: Path = field(default_factory=Path.cwd)  # the folder of the config file (or cwd)
    config_path: Path | None = None
    sources: tuple[Path, ...] = ()  # the configuration files read: config_path, then its bases

    # -- selection --------------------------------------------------------------
    @cached_property
    def enabled_codes(self) -> frozenset[str]:
        if self.select is None:
            chosen = {code for code, (_, on) in CATALOG.items() if on}
        else:
            chosen = set(expand(self.select, "select"))
        chosen |= set(expand(self.extend_select, "extend-select"))
        chosen -= set(expand(self.ignore, "ignore"))
        return frozenset(chosen)

    @cached_property
    def rule_codes(self) -> tuple[str, ...]:
        """The enabled rules that apply to the target torch version, in code order
        (read from the catalog: no rule is imported)."""
        return tuple(code for code, (_, _, versions) in LOAD.items()
                     if code in self.enabled_codes and self._version_ok(versions))

    @cached_property
    def rules(self) -> list[type[Rule]]:
        from ptlint.rule import load  # imports LibCST: only when a file is linted

        return [load(code) for code in self.rule_codes]

    @cached_property
    def all_per_file_ignores(self) -> dict[str, list[str]]:
        """`per-file-ignores` with `extend-per-file-ignores` added, glob by glob."""
        return merge_globs(self.per_file_ignores, self.extend_per_file_ignores)

    @cached_property
    def _per_file(self) -> list[tuple[pathspec.PathSpec, frozenset[str]]]:
        if not self.all_per_file_ignores:
            return []
        import pathspec

        return [
            (pathspec.GitIgnoreSpec.from_lines([glob]),
             frozenset(expand(codes, f"per-file-ignores.{glob}", allow_syntax=True)))
            for glob, codes in self.all_per_file_ignores.items()
        ]

    def _ignored_for(self, path: str) -> frozenset[str]:
        if not self._per_file:
            return frozenset()
        rel = _relative(path, self.root)
        out: set[str] = set()
        for spec, codes in self._per_file:
            if spec.match_file(rel):
                out |= codes
        return frozenset(out)

    def codes_for(self, path: str) -> list[str]:
        """`rule_codes` less the file's per-file ignores."""
        ignored = self._ignored_for(path)
        return [code for code in self.rule_codes if code not in ignored]

    def rules_to_run(self, codes: Sequence[str], text: str) -> list[type[Rule]]:
        """The rules of `codes` that a file of `text` needs, each imported on first use."""
        from ptlint.rule import load

        return [load(code) for code in needed_codes(text, codes)]

    @cached_property
    def _syntax_errors(self) -> bool:
        return "PTL000" not in set(expand(self.ignore, "ignore", allow_syntax=True))

    def is_enabled(self, code: str, path: str) -> bool:
        if code == "PTL000":
            return self._syntax_errors and code not in self._ignored_for(path)
        return code in self.enabled_codes and code not in self._ignored_for(path)

    def _version_ok(self, versions: str | None) -> bool:
        if versions is None or self.torch_version is None:
            return True
        if versions.startswith(">=") and "," not in versions:  # every rule's, today
            from packaging.version import Version  # (specifiers cost a one-file run 20 ms)

            return self.torch_version >= Version(versions[2:].strip())
        from packaging.specifiers import SpecifierSet

        return SpecifierSet(versions).contains(self.torch_version, prereleases=True)

    # -- fixing -----------------------------------------------------------------
    def safety_for(self, code: str, safety: Safety | None) -> Safety:
        if code in set(expand(self.extend_safe_fixes, "extend-safe-fixes")):
            return Safety.SAFE
        if code in set(expand(self.extend_unsafe_fixes, "extend-unsafe-fixes")):
            return Safety.UNSAFE
        return safety or Safety.DISPLAY_ONLY

    def fix_allowed(self, code: str, safety: Safety, *, unsafe: bool) -> bool:
        if safety is Safety.DISPLAY_ONLY or (safety is Safety.UNSAFE and not unsafe):
            return False
        if code in set(expand(self.unfixable, "unfixable", allow_syntax=True)):
            return False
        fixable = [*self.fixable, *self.extend_fixable]
        if code == "PTL000" and any(s.strip().upper() == "ALL" for s in fixable):
            return True  # a syntax error's fix (`async=`) is a rule's as far as ALL goes
        return code in set(expand(fixable, "fixable", allow_syntax=True))

    @cached_property
    def _exclude(self) -> pathspec.PathSpec:
        import pathspec

        return pathspec.GitIgnoreSpec.from_lines([*self.exclude, *self.extend_exclude])

    def excluded(self, path: Path) -> bool:
        return self.excluded_relative(_relative(str(path), self.root), path.name)

    def excluded_relative(self, rel: str, name: str) -> bool:
        """`excluded` for a path already made relative to the root (POSIX)."""
        return self._exclude.match_file(rel) or self._exclude.match_file(name)

    def relative_folder(self, folder: str) -> str | None:
        """An absolute folder, resolved and made relative to the root (POSIX,
        "" for the root itself), or None when it is outside the root."""
        real, root = real_folder(folder), real_folder(str(self.root))
        if real == root:
            return ""
        if real.startswith(root.rstrip(os.sep) + os.sep):
            return real[len(root.rstrip(os.sep)) + 1:].replace(os.sep, "/")
        return None

    def fingerprint(self) -> str:
        """What the cache key must change with."""
        return repr((sorted(self.enabled_codes), self._syntax_errors,
                     sorted(self.all_per_file_ignores.items()), str(self.root),
                     str(self.torch_version), self.extend_safe_fixes, self.extend_unsafe_fixes,
                     self.ignore_noqa))


@functools.lru_cache(maxsize=4096)
def real_folder(folder: str) -> str:
    return os.path.realpath(folder)


def real_path(path: Path) -> Path:
    """`path.resolve()`, each folder resolved once: discovery asks for every
    file, and resolving a path makes a system call per component."""
    if path.name in ("", ".", "..") or os.path.islink(path):
        return path.resolve()
    return Path(real_folder(str(path.parent)), path.name)


def _relative(path: str, root: Path) -> str:
    p = Path(path)
    try:
        return real_path(p).relative_to(real_folder(str(root))).as_posix()
    except (ValueError, OSError):
        return p.as_posix()


def expand(selectors: list[str], key: str, *, allow_syntax: bool = False) -> list[str]:
    """Codes matched by `ALL`, exact codes, prefixes (`PTL1`) or rule names; an
    error's message begins with `key` (where the selectors were written)."""
    out: list[str] = []
    for selector in selectors:
        sel = selector.strip()
        if not sel:
            raise ConfigError(f"{key}: empty rule selector")
        upper = sel.upper()
        if upper == "ALL":
            out.extend(CATALOG)
            continue
        if allow_syntax and upper == "PTL000":
            out.append("PTL000")
            continue
        matched = [c for c, (name, _) in CATALOG.items() if c.startswith(upper) or name == sel]
        if upper and "PTL000".startswith(upper):
            matched.append("PTL000")
        if not matched:
            raise ConfigError(f"{key}: unknown rule selector {selector!r}")
        out.extend(matched)
    return out


# The settings that hold rule selectors.
_SELECTORS = frozenset({"select", "extend_select", "ignore", "fixable", "extend_fixable",
                        "unfixable", "extend_safe_fixes", "extend_unsafe_fixes"})


def assign(settings: Settings, name: str, value: Any, where: str) -> None:
    """`settings.name = value`, written at `where` (`FILE: key`, `--option`), or a
    ConfigError that names it (its type and, for rule selectors, its codes checked)."""
    default = getattr(Settings(), name)
    if name == "torch_version":
        value = parse_version(str(value), where)
        settings.torch_version_source = (where if where.startswith("--") else
                                         f"torch-version in {where.rsplit(': ', 1)[0]}")
        if where.startswith("--config "):  # `--config 'torch-version = "2.1"'`
            settings.torch_version_source = where
        settings.torch_version_explicit = True
    elif name == "cache_dir" and where in ("--cache-dir", CACHE_DIR_ENV):
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{where}: expected a folder")
        settings.cache_dir_explicit = True
    elif name in ("per_file_ignores", "extend_per_file_ignores"):
        if not isinstance(value, dict) or not all(
            isinstance(v, list) and all(isinstance(c, str) for c in v) for v in value.values()
        ):
            raise ConfigError(f"{where}: expected a table of glob = [codes]")
        for glob, codes in value.items():
            expand(codes, f"{where}.{glob}", allow_syntax=True)
    elif name == "select" or isinstance(default, list):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: expected a list of strings")
        if name in _SELECTORS:
            expand(value, where, allow_syntax=True)
    elif isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false")
    elif isinstance(default, str) and not isinstance(value, str):
        raise ConfigError(f"{where}: expected a string")
    elif name == "output_format" and value not in OUTPUT_FORMATS:
        raise ConfigError(f"{where}: unknown output format {value!r} "
                          f"(choose from {', '.join(OUTPUT_FORMATS)})")
    setattr(settings, name, value)


def parse_version(text: str, where: str) -> Any:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        raise ConfigError(f"{where}: invalid torch version {text!r}") from None


def validate(settings: Settings) -> None:
    _check_cache_dir(settings)
    settings._per_file  # noqa: B018 - builds the globs' patterns
    settings.enabled_codes  # noqa: B018
    if settings.torch_version is None:
        from ptlint.target import installed_or_newest

        settings.torch_version, settings.torch_version_source = installed_or_newest()


def _check_cache_dir(settings: Settings) -> None:
    """A configuration's cache folder must be a folder of its own inside the
    project: `ptlint clean` removes it, and a repository's settings must not
    make ptlint write elsewhere. One given by the user (`--cache-dir`,
    PTLINT_CACHE_DIR) may be anywhere. io.cachedir refuses, for both, one that
    holds the project or that ptlint did not create."""
    value = settings.cache_dir
    if settings.cache_dir_explicit:
        return
    where = f"{settings.config_path}: cache-dir" if settings.config_path else "cache-dir"
    root = Path(os.path.abspath(settings.root))
    full = Path(os.path.normpath(root / value)) if value.strip() else root
    if full == root or root not in full.parents:
        raise ConfigError(f"{where} {value!r} must name a folder inside the project ({root}) "
                          "that is not the project itself")

