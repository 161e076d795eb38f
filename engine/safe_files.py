"""One way to read and one way to write the files the product touches.

Reading (``read_bytes`` / ``read_text``): regular files only, told apart by ``stat`` before the file
is opened, so a FIFO, a device or a folder is refused at once instead of hanging or streaming; the
file is then opened without blocking and checked again (it may have been swapped in between), and at
most ``limit`` bytes are read: a larger file is refused with its size and the limit. Text is UTF-8.
Every refusal is an InputError naming the file and what it is for. ``open_stream`` is the reader
for what is meant to be streamed (a log: a file, a FIFO, a character device), bounded by its caller.

Writing (``write_atomic``): a temporary file created with ``O_EXCL | O_NOFOLLOW`` in the destination's
folder, written, flushed and renamed over the destination, so a reader sees the old or the new
content, never half of one; a destination that is a symbolic link is refused, and so is a temporary
name someone planted (a link at ``X.tmp`` is never written through).
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import select
import stat
from pathlib import Path
from typing import Any, BinaryIO

from engine.errors import InputError

MIB = 2**20


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path: str | os.PathLike[str], what: str, limit: int) -> bytes:
    """The bytes of the regular file ``path`` (``what`` it is, for messages: 'task file'), at most
    ``limit`` of them; InputError when it is missing, not a regular file, unreadable or larger."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(f"{what} {p}: no such file", fix="check the path") from None
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot read it ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what} {p}: {_kind(st.st_mode)}, not a regular file", fix="give the path of a file")
    if st.st_size > limit:
        raise InputError(f"{what} {p}: {st.st_size} bytes, more than the {_size(limit)} it may have",
                         fix="give the right file (this limit guards against reading a huge one)")
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot read it ({exc.strerror or exc})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped between stat and open
            raise InputError(f"{what} {p}: not a regular file", fix="give the path of a file")
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, MIB))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot read it ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise InputError(f"{what} {p}: more than the {_size(limit)} it may have", fix="give the right file")
    return data


def read_head(path: str | os.PathLike[str], what: str, n: int) -> bytes:
    """The first ``n`` bytes (or fewer) of the regular file ``path``, which may be of any size (an
    SQLite file's header); the same checks and errors as ``read_bytes``."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(f"{what} {p}: no such file", fix="check the path") from None
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot read it ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{what} {p}: {_kind(st.st_mode)}, not a regular file", fix="give the path of a file")
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot read it ({exc.strerror or exc})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f"{what} {p}: not a regular file", fix="give the path of a file")
        return os.pread(fd, n, 0)
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot read it ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], what: str, limit: int) -> str:
    """``read_bytes`` decoded as UTF-8; InputError naming the byte offset where it is not."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {path}: not UTF-8 text (byte offset {exc.start})",
                         fix="save it as UTF-8") from None


FIFO_IDLE_S = 5.0
"""Seconds a FIFO given by path may stay silent before it is read as ended (a writer that holds it
open and writes nothing would otherwise hold the reader forever)."""


class _FifoReader(io.RawIOBase):
    """A FIFO read without blocking: data as it comes, the end when the writer closes it or after
    ``FIFO_IDLE_S`` seconds without data, and no wait at all when nobody has it open for writing."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.idle_ended = False

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        while True:
            try:
                data = os.read(self.fd, len(buf))  # b"": no writer has it open (or had, and closed it)
            except BlockingIOError:  # a writer, no data yet
                ready, _, _ = select.select([self.fd], [], [], FIFO_IDLE_S)
                if not ready:
                    self.idle_ended = True
                    return 0
                continue
            buf[:len(data)] = data
            return len(data)

    def close(self) -> None:
        if not self.closed:
            os.close(self.fd)
        super().close()


def open_stream(path: str | os.PathLike[str], what: str) -> tuple[BinaryIO, int]:
    """``path`` opened to be read to its end in chunks, and its size (0 where it has none: a FIFO, a
    character device, a /proc file). ``stat`` before ``open``: a folder, a block device or a socket
    is refused; the file is opened without blocking, so a FIFO nobody writes to reads as empty at
    once, and a silent one ends after ``FIFO_IDLE_S``. InputError naming the file otherwise."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(f"{what} {p}: no such file", fix="check the path") from None
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot read it ({exc.strerror or exc})") from None
    mode = st.st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
        raise InputError(f"{what} {p}: {_kind(mode)}, not a file or a pipe", fix="give the path of a file")
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"{what} {p}: cannot read it ({exc.strerror or exc})") from None
    st = os.fstat(fd)
    if stat.S_ISFIFO(st.st_mode):
        return io.BufferedReader(_FifoReader(fd)), 0
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode)):  # swapped between stat and open
        os.close(fd)
        raise InputError(f"{what} {p}: {_kind(st.st_mode)}, not a file or a pipe", fix="give the path of a file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb"), st.st_size if stat.S_ISREG(st.st_mode) else 0


def _size(n: int) -> str:
    return f"{n // MIB} MiB" if n >= MIB and n % MIB == 0 else f"{n} bytes"


def write_atomic(path: str | os.PathLike[str], data: bytes | str, mode: int = 0o600, what: str | None = None) -> None:
    """Replace ``path`` with ``data`` atomically (see the module's docstring). A destination that is
    a symbolic link is an InputError; so is any OSError when ``what`` names the destination for
    messages ('--export': '--export=PATH: cannot write it (No space left on device)'), else the
    OSError is raised as it is."""
    p = Path(path)
    label = f"{what}={p}" if what else str(p)
    try:
        if p.is_symlink():
            raise InputError(f"{label}: is a symbolic link; refusing to write through it",
                             fix="remove the link or write to another path")
        _write(p, data, mode)
    except OSError as exc:
        if what is None:
            raise
        raise InputError(f"{label}: cannot write it ({exc.strerror or exc})",
                         fix="give a path in a folder you can write, with a name of at most 255 bytes") from None


def _write(p: Path, data: bytes | str, mode: int) -> None:
    raw = data.encode() if isinstance(data, str) else data
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(8):
        tmp = p.with_name(f".{p.name[:40]}.{secrets.token_hex(6)}.tmp")  # fits beside a 255-byte name
        try:
            fd = os.open(tmp, flags, mode)
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover -- eight random names taken
        raise OSError(f"{p}: could not create a temporary file beside it")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
