"""The results cache: findings keyed by everything that decides them (the file's
content and resolved path, the effective settings, ptlint's and Python's
versions, and ptlint's own code files), in ptlint's own cache folder (see cachedir)."""
from __future__ import annotations

import functools
import hashlib
import hmac
import importlib.util
import io
import os
import pickle
import secrets
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from ptlint import __version__
from ptlint._catalog import RULES as CATALOG
from ptlint.config import Settings, real_path
from ptlint.io.cachedir import _is_dir, ensure
from ptlint.io.text import signals_deferred
from ptlint.model import SYNTAX_ERROR, Edit, Finding, Fix, Position, Safety, Span


def code_stamp(folders: list[str] | None = None) -> str:
    """ptlint's code (its package, rules and fixers) by its files' sizes and times:
    in a source checkout an edited rule is not answered from the cache of the old one.
    Without `folders`, the installed code's, worked out once per process (a Cache is
    made for every file)."""
    if folders is None:
        return _installed_code_stamp()
    stamps = hashlib.sha256()
    for folder in sorted(set(folders)):
        for path in sorted(Path(folder).rglob("*.py")):
            try:
                stat = path.stat()
            except OSError:
                continue
            stamps.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return stamps.hexdigest()


@functools.cache
def _installed_code_stamp() -> str:
    return code_stamp([folder for name in ("ptlint", "ptlint.rules", "ptlint.fixers")
                       for folder in importlib.util.find_spec(name).submodule_search_locations or []])


class _ModelUnpickler(pickle.Unpickler):
    """Loads findings and nothing else: a plain pickle.load would run whatever an
    entry names, and the cache lives in the project folder."""

    ALLOWED = frozenset({"Finding", "Span", "Position", "Fix", "Edit", "Safety"})

    def find_class(self, module: str, name: str):
        if module == "ptlint.model" and name in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in ptlint's cache")


_KEY: bytes | None = None


def user_key() -> bytes | None:
    """This user's secret for signing entries, made once and kept in the user's
    cache folder (XDG_CACHE_HOME, else ~/.cache): a repository can ship a cache
    folder whose entries' names anyone can compute, but not sign them. None
    when there is no place to keep it (the cache is then off)."""
    global _KEY
    if _KEY is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = Path(base, "ptlint", "key")
        try:
            _KEY = path.read_bytes()
        except FileNotFoundError:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(secrets.token_bytes(32))
            except FileExistsError:
                pass  # another run made it meanwhile
            except OSError:
                return None
            try:
                _KEY = path.read_bytes()
            except OSError:
                return None
        except OSError:
            return None
        if len(_KEY) < 16:
            _KEY = None
    return _KEY


class Cache:
    """Results keyed by everything that decides them; each entry one small file,
    signed, written atomically, so concurrent runs can share the folder.

    A damaged, foreign or unsigned entry, or one that is not a list of findings
    this run could produce, is only a miss.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        top = ensure(settings)
        self.secret = user_key()
        self.folder = top / __version__ if top is not None and self.secret else None
        self.salt = "\0".join((
            __version__, sys.implementation.name, "%d.%d" % sys.version_info[:2],
            settings.fingerprint(), code_stamp(),
        )).encode()
        self._codes = settings.enabled_codes | {SYNTAX_ERROR[0]}

    def key(self, path: str, data: bytes) -> str:
        """The entry of `path` holding `data`: the path resolved, so that two files
        of the same content never share results that depend on where they are."""
        where = os.fsencode(str(real_path(Path(os.path.abspath(path)))))
        return hashlib.sha256(self.salt + b"\0" + where + b"\0" + data).hexdigest()

    def get(self, key: str, path: str) -> list[Finding] | None:
        """The findings of the entry, reported for `path`; None for a miss."""
        if self.folder is None:
            return None
        try:
            with open(self.folder / key[:2] / key, "rb") as handle:
                blob = handle.read()
            signature, body = blob[:32], blob[32:]
            if not hmac.compare_digest(signature, self._sign(key, body)):
                return None
            found = _ModelUnpickler(io.BytesIO(body)).load()
        except Exception:  # noqa: BLE001 - a damaged or foreign entry is only a miss
            return None
        if not isinstance(found, list) or not all(self._valid(f) for f in found):
            return None
        return [replace(f, path=path) for f in found]

    def put(self, key: str, findings: list[Finding]) -> None:
        if self.folder is None:
            return
        bucket = self.folder / key[:2]
        try:
            for folder in (self.folder, bucket):  # real folders, never links
                if not _is_dir(folder):
                    folder.mkdir()
                    if not _is_dir(folder):
                        return
            body = pickle.dumps(findings, protocol=pickle.HIGHEST_PROTOCOL)
            with signals_deferred():
                fd, tmp = tempfile.mkstemp(dir=bucket, prefix=".tmp-")
                try:
                    with os.fdopen(fd, "wb") as handle:
                        handle.write(self._sign(key, body) + body)
                    os.replace(tmp, bucket / key)
                except BaseException:
                    os.unlink(tmp)
                    raise
        except (OSError, pickle.PickleError):
            pass  # a cache that cannot be written is only slower

    def _sign(self, key: str, body: bytes) -> bytes:
        assert self.secret is not None
        return hmac.new(self.secret, key.encode() + b"\0" + body, hashlib.sha256).digest()

    def _valid(self, f: object) -> bool:
        """A finding this run could report: a known, enabled code under its own name,
        positions and edits that make sense."""
        if not isinstance(f, Finding) or f.code not in self._codes:
            return False
        name = SYNTAX_ERROR[1] if f.code == SYNTAX_ERROR[0] else CATALOG[f.code][0]
        if f.name != name or not isinstance(f.message, str) or not _span(f.span):
            return False
        if f.cell is not None and not (isinstance(f.cell, int) and f.cell >= 0):
            return False
        fix = f.fix
        return fix is None or (
            isinstance(fix, Fix) and isinstance(fix.safety, Safety) and isinstance(fix.title, str)
            and isinstance(fix.edits, tuple) and bool(fix.edits)
            and all(isinstance(e, Edit) and _span(e) and isinstance(e.content, str)
                    for e in fix.edits)
            and isinstance(fix.imports, tuple) and all(isinstance(i, str) for i in fix.imports))


def _span(span: object) -> bool:
    start, end = getattr(span, "start", None), getattr(span, "end", None)
    return all(isinstance(p, Position) and isinstance(p.line, int) and isinstance(p.column, int)
               and p.line >= 1 and p.column >= 0 for p in (start, end)) and start <= end

