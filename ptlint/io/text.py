"""Reading and writing source files without losing a byte we should not touch."""
from __future__ import annotations

import functools
import io
import os
import re
import signal
import tempfile
import tokenize
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from ptlint.model import Edit, Position

_NEWLINE = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Source:
    text: str  # decoded, BOM removed, line endings untouched
    encoding: str  # as Python would decode it (PEP 263 cookie or UTF-8)
    bom: bool


class DecodeError(Exception):
    """The file is not text in the encoding it declares."""

    def __init__(self, message: str, line: int = 1, column: int = 0) -> None:
        super().__init__(message)
        self.line = line
        self.column = column  # 0-based, in bytes of the line


_LINE_BYTES = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)?")
_BREAK_BYTES = re.compile(rb"\r\n|\r|\n")


def _first_lines(data: bytes, count: int) -> list[bytes]:
    """The first lines of `data` with their line breaks, split as the tokenizer
    splits them: a file saved with classic Mac line endings has no \\n at all."""
    lines = []
    for match in _LINE_BYTES.finditer(data):
        if not match.group() or len(lines) == count:
            break
        lines.append(match.group())
    return lines


def _undecodable(data: bytes, encoding: str, exc: UnicodeDecodeError) -> DecodeError:
    breaks = list(_BREAK_BYTES.finditer(data, 0, exc.start))
    line_start = breaks[-1].end() if breaks else 0
    line = len(breaks) + 1
    bad = data[exc.start:exc.start + 1].hex()
    return DecodeError(
        f"not valid {encoding.removesuffix('-sig')}: byte 0x{bad} at line {line}, "
        f"column {exc.start - line_start + 1} ({exc.reason})",
        line, exc.start - line_start,
    )


_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=]")


def decode(data: bytes) -> Source:
    """Decode bytes as the Python interpreter would (BOM, coding cookie, UTF-8)."""
    first_two = _first_lines(data, 2)  # where PEP 263 looks for the coding comment
    try:
        encoding, _ = tokenize.detect_encoding(iter([*first_two, b""]).__next__)
    except SyntaxError as exc:
        if "invalid or missing encoding declaration" not in str(exc):
            raise DecodeError(str(exc), getattr(exc, "lineno", None) or 1) from None
        encoding = "utf-8"  # no cookie, and the first lines are not UTF-8
    bom = encoding == "utf-8-sig"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        error = _undecodable(data, encoding, exc)
        if encoding == "utf-8" and not any(_COOKIE.match(line) for line in first_two):
            raise DecodeError(f"{error}, and no PEP 263 coding comment declares another "
                              "encoding", error.line, error.column) from None
        raise error from None
    except (LookupError, UnicodeError) as exc:  # a cookie naming a codec that is not a text encoding
        raise DecodeError(f"cannot decode as {encoding}: {exc}", 1) from None
    return Source(text=text, encoding="utf-8" if bom else encoding, bom=bom)


def read_source(path: Path) -> Source:
    return decode(path.read_bytes())


def encode(source: Source, text: str) -> bytes:
    data = text.encode(source.encoding)
    return (b"\xef\xbb\xbf" + data) if source.bom else data


_DEFERRED = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP for this thread until the block ends: a
    signal that arrives meanwhile is delivered (and acted on) right after it."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows: nothing to hold
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class FileChanged(Exception):
    """The file on disk is no longer the one the new content was computed from."""


def write_atomic(path: Path, data: bytes, expected: bytes | None = None) -> None:
    """Replace `path` with `data` in one rename, keeping its permission bits, owner
    and extended attributes (POSIX ACLs among them) where the system allows.

    A temporary file in the same folder is written, synced and renamed over the
    original, so an interrupt leaves either the old or the new file, never half
    of one; the temporary file is removed if anything goes wrong. Interrupts
    are held while the file is written, so a worker process killed by SIGTERM
    dies after the rename, never between creating and removing the temporary
    file. A symbolic link is kept: the file it points to is replaced. A hard
    link is not: the new file has the name given, and the file's other names
    keep the old content (writing through them in place could change a backup
    snapshot or a package cache that shares the file, and would not be atomic).

    With `expected`, the file is replaced only if it still holds exactly those
    bytes just before the rename (an editor may have saved it meanwhile):
    FileChanged otherwise, and nothing is written.
    """
    target = Path(os.path.realpath(path))
    with signals_deferred():
        info = target.stat()
        fd, tmp = tempfile.mkstemp(prefix=f".{_short(target.name)}.", suffix=".ptlint-tmp",
                                   dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            _copy_xattrs(target, tmp)
            if hasattr(os, "geteuid") and (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
                try:
                    os.chown(tmp, info.st_uid, info.st_gid)
                except OSError:
                    pass  # only root may give a file away; the permission bits are kept anyway
            os.chmod(tmp, info.st_mode & 0o7777)
            if expected is not None and target.read_bytes() != expected:
                raise FileChanged(str(path))
            os.replace(tmp, target)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise


def _short(name: str, limit: int = 64) -> str:
    """At most `limit` bytes of a file name, cut between characters: a temporary
    name made of a long multibyte name would pass the system's limit (255 bytes)."""
    raw = os.fsencode(name)
    if len(raw) <= limit:
        return name
    return raw[:limit].decode("utf-8", "ignore") or "file"


def _copy_xattrs(source: Path, target: str) -> None:
    """Copy the extended attributes the system lets us set; the others are lost
    (a security label only a privileged process may set, a file system without them)."""
    if not hasattr(os, "listxattr"):
        return
    try:
        names = os.listxattr(source)
    except OSError:
        return
    for name in names:
        try:
            os.setxattr(target, name, os.getxattr(source, name))
        except OSError:
            pass


@functools.lru_cache(maxsize=16)  # the engine and the renderers ask again for the same text
def line_starts(text: str) -> tuple[int, ...]:
    """Offsets at which each line starts (index 0 is line 1), counting \\r\\n, \\r and \\n
    as line breaks like the tokenizer does (a form feed is not one)."""
    if "\r" not in text:
        return (0, *accumulate(len(line) + 1 for line in text.split("\n")[:-1]))
    return (0, *(m.end() for m in _NEWLINE.finditer(text)))


def line_text(text: str, starts: Sequence[int], line: int) -> str:
    """Line `line` (1-based) without its line break."""
    if line - 1 >= len(starts):
        return ""
    start = starts[line - 1]
    end = starts[line] if line < len(starts) else len(text)
    return text[start:end].rstrip("\r\n")


_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def offsets(text: str):
    """A function from a position in `text` to its index."""
    starts = line_starts(text)

    def offset(pos: Position) -> int:
        if pos.line > len(starts):  # the end of a file without a final line break
            return len(text)
        return starts[pos.line - 1] + pos.column

    return offset


def apply_edits(text: str, edits: Iterable[Edit]) -> str:
    """`text` with the edits (which must not overlap) made."""
    offset = offsets(text)

    out, last = [], 0
    for edit in sorted(edits):
        begin, end = offset(edit.start), offset(edit.end)
        out.append(text[last:begin])
        out.append(edit.content)
        last = end
    out.append(text[last:])
    return "".join(out)


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def lines_of(text: str) -> list[str]:
    """Lines with their line breaks (\\r\\n, \\r and \\n, like the tokenizer; not
    str.splitlines(), which also breaks at form feeds and other separators)."""
    return _LINE.findall(text)


def tokens(text: str) -> Iterable[tokenize.TokenInfo]:
    """The text's tokens up to the first error (a text that does not tokenize
    does not parse either: a PTL000 finding). Lines break at \\r\\n, \\r and \\n, as
    for Python and the positions of findings."""
    try:
        yield from tokenize.generate_tokens(io.StringIO(text, newline=None).readline)
    except (tokenize.TokenError, SyntaxError, ValueError, RecursionError, SystemError):
        return  # SystemError: CPython 3.13.0's tokenizer on a null byte


def printable(text: str) -> str:
    """`text` safe to print on a terminal: control characters (an escape sequence
    in a file name, a line break) are written as Python escapes (`\\x1b`, `\\n`)."""
    return _CONTROLS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def one_line(exc: BaseException, limit: int = 200) -> str:
    """`Type: message` on one line (an exception's text may be a multi-line node repr)."""
    text = " ".join(str(exc).split())
    if len(text) > limit:
        text = text[:limit - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def write_fixed(path: Path, source: Source, text: str, fixes: int,
                original: bytes | None = None) -> str | None:
    """Write `text`, the file with `fixes` fixes applied, over `path` in the file's
    own encoding, atomically, unless the file changed since `original` was read. Returns why nothing was written,
    or None when it was."""
    name = str(path)
    try:
        writable = os.access(path, os.W_OK) and bool(path.stat().st_mode & 0o222)
    except OSError:
        writable = False
    if not writable:  # root may write anything: the mode bits say what the owner wants
        return f"{name}: file is read-only; {fixes} fix(es) not written"
    try:
        data = encode(source, text)
    except UnicodeEncodeError:
        return f"{name}: fixed text cannot be encoded as {source.encoding}; not written"
    try:
        write_atomic(path, data, expected=original)
    except FileChanged:
        return f"{name}: changed while ptlint was fixing it; not written"
    except OSError as exc:
        return f"{name}: cannot write: {exc.strerror or exc}"
    return None
