"""Which files to lint: walk the given paths, honouring .gitignore and excludes."""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import TYPE_CHECKING

from ptlint.config import Settings, real_path
from ptlint.config_files import Configs

if TYPE_CHECKING:  # imported for the first .gitignore read
    import pathspec


@dataclass
class Discovery:
    files: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _gitignore(folder: Path) -> pathspec.PathSpec | None:
    try:
        lines = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(lines)


class _Ignores:
    """The .gitignore files that apply to a folder, from the repository root down."""

    def __init__(self) -> None:
        self.cache: dict[Path, list[tuple[Path, pathspec.PathSpec]]] = {}
        self.roots: dict[Path, Path | None] = {}

    def git_root(self, folder: Path) -> Path | None:
        """The repository `folder` is in (each folder looked at once)."""
        if folder not in self.roots:
            if (folder / ".git").exists():
                found: Path | None = folder
            else:
                found = None if folder.parent == folder else self.git_root(folder.parent)
            self.roots[folder] = found
        return self.roots[folder]

    def for_folder(self, folder: Path) -> list[tuple[Path, pathspec.PathSpec]]:
        if folder in self.cache:
            return self.cache[folder]
        root = self.git_root(folder)
        if root is None:
            specs: list[tuple[Path, pathspec.PathSpec]] = []
        elif folder == root or folder.parent == folder:
            specs = []
        else:
            specs = list(self.for_folder(folder.parent))
        if root is not None:
            spec = _gitignore(folder)
            if spec is not None:
                specs = [*specs, (folder, spec)]
        self.cache[folder] = specs
        return specs

    def ignored(self, path: Path, is_dir: bool) -> bool:
        for base, spec in self.for_folder(path.parent):
            rel = path.relative_to(base).as_posix() + ("/" if is_dir else "")
            if spec.match_file(rel):
                return True
        return False


def discover(paths: list[str], settings: Settings | Configs) -> Discovery:
    """The files to lint under `paths`. With `Configs`, each folder is walked
    with the settings of its own configuration (its excludes, includes and
    `.gitignore` choice), as ruff does."""
    configs = settings if isinstance(settings, Configs) else Configs(settings)
    found = Discovery()
    seen: set[Path] = set()
    ignores = _Ignores()

    def add(path: Path) -> None:
        key = real_path(path)
        if key not in seen:
            seen.add(key)
            found.files.append(path)

    for raw in paths:
        path = Path(raw)
        if path.is_file():
            # named explicitly: linted unless --force-exclude asks to apply the excludes
            own = configs.for_path(path)
            if not (own.force_exclude and (own.excluded(path.absolute()) or (
                    own.respect_gitignore and ignores.ignored(path.absolute(), False)))):
                add(path)
            continue
        if not path.is_dir():
            found.errors.append(f"{raw}: {_not_found(path)}")
            continue
        # Strings, not Paths, and each folder resolved once: this loop runs for
        # every file of the tree, and on a warm cache it is most of the run.
        for folder, dirnames, filenames in os.walk(path, onerror=_collect(found, raw)):
            here = os.path.abspath(folder)
            own = configs.for_folder(here)
            patterns = [*own.include, *own.extend_include]
            rel_here = own.relative_folder(here)
            gitignores = ignores.for_folder(Path(here)) if own.respect_gitignore else []

            def excluded(name: str, is_dir: bool) -> bool:
                full = os.path.join(here, name)
                if os.path.islink(full):  # resolved on its own
                    if own.excluded(Path(full)):
                        return True
                elif rel_here is None:  # outside the root: matched as an absolute path
                    if own.excluded_relative(Path(full).as_posix(), name):
                        return True
                elif own.excluded_relative(f"{rel_here}/{name}" if rel_here else name, name):
                    return True
                return bool(gitignores) and ignores.ignored(Path(full), is_dir)

            dirnames[:] = [name for name in sorted(dirnames) if not excluded(name, True)]
            for name in sorted(filenames):
                if not any(fnmatch(name, p) for p in patterns):
                    continue
                if not os.path.isfile(os.path.join(here, name)):  # a dangling symlink, a
                    continue  # symlink loop, a FIFO... (first: resolving a loop raises)
                if not excluded(name, False):
                    add(Path(folder, name))
    return found


def size(path: Path) -> int:
    """The file's size in bytes; 0 when it cannot be read (its error comes when it is)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _not_found(path: Path) -> str:
    """Why a path named on the command line cannot be linted."""
    try:
        path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symbolic link loop"
        if path.is_symlink():
            return "broken symbolic link"
        return exc.strerror.lower() if exc.strerror else "no such file or directory"
    return "not a regular file or a directory"


def _collect(found: Discovery, raw: str):
    def onerror(exc: OSError) -> None:
        found.errors.append(f"{exc.filename or raw}: cannot read folder: {exc.strerror}")

    return onerror
