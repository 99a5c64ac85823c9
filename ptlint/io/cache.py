"""The results cache: findings keyed by file content, ptlint version and the
effective settings, in the project's cache folder."""
from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import tempfile

from ptlint import __version__
from ptlint.config import Settings
from ptlint.io.text import signals_deferred
from ptlint.model import Finding


class _ModelUnpickler(pickle.Unpickler):
    """Loads findings and nothing else. The cache lives in the project folder, so a
    repository could ship a crafted entry (its key is computable): a plain
    pickle.load would run whatever that entry names."""

    ALLOWED = frozenset({"Finding", "Span", "Position", "Fix", "Edit", "Safety"})

    def find_class(self, module: str, name: str):
        if module == "ptlint.model" and name in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in ptlint's cache")


class Cache:
    """Results keyed by file content, ptlint version and effective settings.

    One small file per entry, written atomically, so concurrent runs can share it.
    """

    def __init__(self, settings: Settings) -> None:
        self.folder = settings.root / settings.cache_dir / __version__
        self.salt = f"{__version__}\0{settings.fingerprint()}".encode()

    def key(self, path: str, data: bytes) -> str:
        return hashlib.sha256(self.salt + os.fsencode(path) + b"\0" + data).hexdigest()

    def get(self, key: str) -> list[Finding] | None:
        try:
            with open(self.folder / key[:2] / key, "rb") as handle:
                found = _ModelUnpickler(handle).load()
        except Exception:  # noqa: BLE001 - a damaged or foreign entry is only a miss
            return None
        if not isinstance(found, list) or not all(isinstance(f, Finding) for f in found):
            return None
        return found

    def put(self, key: str, findings: list[Finding]) -> None:
        folder = self.folder / key[:2]
        try:
            folder.mkdir(parents=True, exist_ok=True)
            top = self.folder.parent
            if not (top / ".gitignore").exists():
                (top / ".gitignore").write_text("# created by ptlint\n*\n")
            with signals_deferred():
                fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
                try:
                    with os.fdopen(fd, "wb") as handle:
                        pickle.dump(findings, handle, protocol=pickle.HIGHEST_PROTOCOL)
                    os.replace(tmp, folder / key)
                except BaseException:
                    os.unlink(tmp)
                    raise
        except (OSError, pickle.PickleError):
            pass  # a cache that cannot be written is only slower


def clean(settings: Settings) -> bool:
    folder = settings.root / settings.cache_dir
    if folder.is_dir():
        shutil.rmtree(folder, ignore_errors=True)
        return True
    return False
