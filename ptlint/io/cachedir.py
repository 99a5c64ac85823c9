"""The cache folder: ptlint's own, marked as such, and never anything else.

A folder is ptlint's when ptlint created it (it holds ptlint's CACHEDIR.TAG,
written with the folder, per https://bford.info/cachedir/), when it was made by
a ptlint release that did not tag it yet (only ptlint's `.gitignore` and
version folders), or when it is empty (ptlint then marks it). ptlint writes
into no other folder, and `clean` removes only what ptlint writes: the marks,
the version folders and their entries. A symbolic link to a folder is followed
once, at the top; no link inside is followed.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ptlint.config import Settings

TAG_NAME = "CACHEDIR.TAG"
TAG = ("Signature: 8a477f597d28d172789f06886806bc55\n"
       "# This file is a cache directory tag created by ptlint.\n"
       "# For information about cache directory tags, see https://bford.info/cachedir/\n")
_TAG_MARK = "# This file is a cache directory tag created by ptlint."
GITIGNORE = "# created by ptlint\n*\n"
_VERSION = re.compile(r"\d+(?:\.\d+)*(?:[a-z]+\d*)?(?:\.(?:post|dev)\d+)?(?:\+[\w.]+)?")
_BUCKET = re.compile(r"[0-9a-f]{2}")
_ENTRY = re.compile(r"[0-9a-f]{64}|\.tmp-\w+")


class CacheError(Exception):
    """The configured cache folder cannot be ptlint's; the message says why."""


def cache_folder(settings: Settings) -> Path:
    return settings.root / settings.cache_dir


def _read_small(path: Path) -> str | None:
    """A regular file's text (never through a link), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read(4096).decode("utf-8", "replace")


def _tagged(folder: Path) -> bool:
    text = _read_small(folder / TAG_NAME)
    return text is not None and text.startswith(TAG.splitlines()[0]) and _TAG_MARK in text


def _untagged_but_ours(folder: Path, names: list[str]) -> bool:
    """A cache of a ptlint release before the tag: its .gitignore and version folders."""
    if ".gitignore" not in names or _read_small(folder / ".gitignore") != GITIGNORE:
        return False
    return all(name == ".gitignore" or (_VERSION.fullmatch(name) and _is_dir(folder / name))
               for name in names)


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _write_new(path: Path, text: str) -> None:
    """Create `path` with `text`; never through a link, never over a file."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)


def _mark(folder: Path) -> None:
    _write_new(folder / ".gitignore", GITIGNORE)
    _write_new(folder / TAG_NAME, TAG)


def check(settings: Settings) -> None:
    """CacheError unless the cache folder is, or can become, ptlint's own."""
    folder = cache_folder(settings)
    where = f"cache-dir {settings.cache_dir!r} ({folder})"
    real = Path(os.path.realpath(folder))
    root = Path(os.path.realpath(settings.root))
    if real == root or real in root.parents:
        raise CacheError(f"{where} is the project folder or one that holds it; "
                         "choose a folder of its own")
    if not os.path.lexists(folder):
        return
    if os.path.islink(folder) and not os.path.exists(folder):
        raise CacheError(f"{where} is a broken symbolic link")
    if not os.path.isdir(folder):
        raise CacheError(f"{where} is not a folder")
    if not _ours(real):
        raise CacheError(f"{where} exists and was not created by ptlint (it has no "
                         f"{TAG_NAME} of ptlint's); choose another cache-dir, or remove it")


def _ours(real: Path) -> bool:
    """Whether the (resolved) folder is ptlint's, or empty."""
    try:
        names = os.listdir(real)
    except OSError:
        return False
    return not names or _tagged(real) or _untagged_but_ours(real, names)


_ENSURED: dict[tuple[str, str], Path | None] = {}


def ensure(settings: Settings) -> Path | None:
    """The (resolved) cache folder, created and marked if need be; None when it is
    not ptlint's or cannot be made (the run is then only slower). Once per process."""
    folder = cache_folder(settings)
    memo = (str(folder), str(settings.root))
    if memo not in _ENSURED:
        _ENSURED[memo] = _ensure(settings, folder)
    return _ENSURED[memo]


def _ensure(settings: Settings, folder: Path) -> Path | None:
    try:
        check(settings)
        if not os.path.lexists(folder):
            folder.parent.mkdir(parents=True, exist_ok=True)
            # marked before it gets its name, so that no run ever sees it unmarked
            import secrets

            new = folder.parent / f".{folder.name}.{secrets.token_hex(6)}.tmp"
            os.mkdir(new)  # as any folder the user makes (mkdtemp's would be private)
            try:
                _mark(new)
                os.rename(new, folder)
            except OSError:
                shutil.rmtree(new, ignore_errors=True)
                if not os.path.isdir(folder):  # else another run made it meanwhile
                    return None
        real = Path(os.path.realpath(folder))
        names = os.listdir(real)
        if not names:  # adopted: marked as ptlint's
            _mark(real)
        elif _untagged_but_ours(real, names):  # made by a release that did not tag it
            _write_new(real / TAG_NAME, TAG)
        elif not _tagged(real):
            return None
        return real
    except (CacheError, OSError):
        return None


@dataclass
class Cleaned:
    removed: int = 0  # files
    kept: list[str] = field(default_factory=list)  # what ptlint did not write, left in place


def clean(settings: Settings) -> Cleaned | None:
    """Remove what ptlint wrote in the cache folder; None if there is none.
    CacheError if the folder is not ptlint's: then nothing is removed."""
    folder = cache_folder(settings)
    if not os.path.lexists(folder):
        return None
    check(settings)
    real = Path(os.path.realpath(folder))
    report = Cleaned()
    for entry in sorted(os.scandir(real), key=lambda e: e.name):
        path = Path(entry.path)
        if entry.name == TAG_NAME and _tagged(real):
            continue  # last: the folder stays ptlint's until it is empty
        if entry.name == ".gitignore" and _read_small(path) == GITIGNORE:
            continue
        if _VERSION.fullmatch(entry.name) and _is_dir(path):
            _clean_version(path, report)
        else:
            report.kept.append(str(folder / entry.name))
    if report.kept:
        return report
    for name in (".gitignore", TAG_NAME):
        try:
            os.unlink(real / name)
            report.removed += 1
        except FileNotFoundError:
            pass
    if not os.path.islink(folder):  # a link the user made keeps its (now empty) folder
        os.rmdir(real)
    return report


def _clean_version(version: Path, report: Cleaned) -> None:
    kept = len(report.kept)
    for bucket in sorted(os.scandir(version), key=lambda e: e.name):
        if not (_BUCKET.fullmatch(bucket.name) and bucket.is_dir(follow_symlinks=False)):
            report.kept.append(bucket.path)
            continue
        mine = True
        for entry in os.scandir(bucket.path):
            if _ENTRY.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
                report.removed += 1
            else:
                report.kept.append(entry.path)
                mine = False
        if mine:
            os.rmdir(bucket.path)
    if len(report.kept) == kept:
        os.rmdir(version)
