"""The directory backend: one file per object under a root directory (the local stack's store).

Writes go to a hidden `.tmp-*` file in the object's own directory and are renamed over the key
with `os.replace`, which is atomic within one file system: a reader opens either the old file or
the new one, never a partial one. A create-if-absent write links the finished file to the key
instead (`os.link` fails when the name exists), so of two writers exactly one creates it. Hidden
files are never listed. Directories appear on demand and empty ones are pruned on delete, so
prefixes behave like S3's: they exist while objects do.
"""

from __future__ import annotations

import builtins
import contextlib
import datetime
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, overload

from ai_models.adapters.objectstore.base import (
    ByteSource,
    ObjectInfo,
    ObjectNotFound,
    ObjectStoreError,
    store_error,
)
from ai_models.adapters.objectstore.keys import (
    RESERVED_SEGMENT_PREFIX,
    InvalidKey,
    validate_key,
    validate_prefix,
)
from ai_models.adapters.objectstore.ranges import check_range
from ai_models.adapters.objectstore.streams import CountingSource, SizeMismatch, reader
from ai_models.settings import Settings

# The setting that names this store's directory (file:///...), for hints that say what to change.
_STORE_URL = Settings.variable("store_url")

COPY_CHUNK_BYTES = 1024 * 1024  # read (and hashed, by the publisher) a megabyte at a time
# ...but written in smaller pieces, the I/O size of coreutils' cp: on kernels with large page-cache
# folios (6.x), writes of 512 KiB and more cost two to three times the CPU of 128 KiB ones once
# the file is fsync'd (measured here: 2 GiB took 0.6 s of CPU in 128 KiB writes, 1.7-3.5 s in 1 MiB).
WRITE_BYTES = 128 * 1024

_NOT_AN_OBJECT = (FileNotFoundError, NotADirectoryError, IsADirectoryError)
_NO_KERNEL_COPY = frozenset({errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL})


class DirectoryStore:
    """An ObjectStore in a local directory; see the module docstring for the guarantees."""

    def __init__(self, root: Path | str) -> None:
        root = Path(root)
        if not root.is_absolute():
            raise ValueError(f"the directory store needs an absolute path, got {str(root)!r}")
        self.root = root
        self.description = f"directory {root}"

    def put_bytes(self, key: str, data: bytes) -> ObjectInfo:
        return self._write(key, self._writing(key, (data,)))

    def put_bytes_if_absent(self, key: str, data: bytes) -> ObjectInfo | None:
        return self._write(key, self._writing(key, (data,)), exclusive=True)

    def put_stream(self, key: str, stream: ByteSource, *, size: int | None = None) -> ObjectInfo:
        source = CountingSource(
            stream, expected=size, chunk_bytes=COPY_CHUNK_BYTES, store=self.description, key=key
        )
        return self._write(key, self._writing(key, _pieces(source)))

    def copy_range(self, key: str, source_key: str, *, start: int, length: int) -> ObjectInfo:
        check_range(start, None)
        if length < 0:
            raise ValueError(f"a copy takes 0 or more bytes, got length={length}")
        self._path(key)  # a bad target key is refused before the source is touched
        source = self._path(source_key)
        try:
            descriptor = os.open(source, os.O_RDONLY)
        except _NOT_AN_OBJECT:
            raise ObjectNotFound(source_key, self.description) from None
        except OSError as exc:
            raise self._failure("read", source_key, exc) from exc
        try:
            return self._write(
                key, lambda out: self._copy(descriptor, out, start=start, length=length, key=key)
            )
        finally:
            os.close(descriptor)

    def get_bytes(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return path.read_bytes()
        except _NOT_AN_OBJECT:
            raise ObjectNotFound(key, self.description) from None
        except OSError as exc:
            raise self._failure("read", key, exc) from exc

    def open_range(self, key: str, *, start: int = 0, end: int | None = None) -> BinaryIO:
        limit = check_range(start, end)
        path = self._path(key)
        try:
            file = open(path, "rb", buffering=0)  # noqa: SIM115  (the returned stream closes it)
        except _NOT_AN_OBJECT:
            raise ObjectNotFound(key, self.description) from None
        except OSError as exc:
            raise self._failure("read", key, exc) from exc
        # Seeking past the end is allowed and reads nothing, which is what the contract asks for.
        file.seek(start)
        return reader(
            file.read,
            readinto=file.readinto,
            close=file.close,
            limit=limit,
            translate=lambda exc: self._failure("read", key, exc),
        )

    def head(self, key: str) -> ObjectInfo | None:
        path = self._path(key)
        try:
            status = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise self._failure("inspect", key, exc) from exc
        return _info(key, status) if stat.S_ISREG(status.st_mode) else None

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        base, base_key, partial = self._split_prefix(prefix)
        return self._walk(base, base_key, partial)

    def list_prefixes(self, prefix: str) -> builtins.list[str]:
        base, base_key, partial = self._split_prefix(prefix)
        found = []
        for name, is_dir, _entry in self._entries(base, base_key):
            # A directory holding only in-flight temp files has no objects yet, so it is no prefix.
            if (
                is_dir
                and name.startswith(partial)
                and next(self._walk(base / name, f"{base_key}{name}/"), None)
            ):
                found.append(f"{base_key}{name}/")
        return sorted(found)

    def delete(self, key: str) -> None:
        path = self._path(key)
        try:
            path.unlink()
        except _NOT_AN_OBJECT:
            return
        except OSError as exc:
            raise self._failure("delete", key, exc) from exc
        self._prune(path.parent)

    def delete_prefix(self, prefix: str) -> int:
        validate_prefix(prefix, allow_empty=False)
        if not prefix.endswith("/"):
            raise InvalidKey(prefix, "delete_prefix needs a prefix ending with '/'")
        # Collect first: unlinking while walking would prune directories the walk still has to visit.
        keys = [info.key for info in self.list(prefix)]
        deleted = 0
        parents = set()
        for key in keys:
            # Not re-validated: the walk found the file inside the root, whatever its name.
            path = self.root.joinpath(*key.split("/"))
            try:
                path.unlink()
            except FileNotFoundError:
                continue  # a concurrent delete got there first; it counts that one
            except OSError as exc:
                raise self._failure("delete", key, exc) from exc
            deleted += 1
            parents.add(path.parent)
        for parent in sorted(parents, key=lambda path: len(path.parts), reverse=True):
            self._prune(parent)
        return deleted

    def check(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise store_error(
                store=self.description,
                action="use the store",
                key=None,
                cause="the path exists and is not a directory",
                hint=f"point {_STORE_URL} at a directory",
            )
        try:
            descriptor, temp = self._create_temp(self.root)
            os.close(descriptor)
            temp.unlink()
        except OSError as exc:
            raise self._failure("use the store", None, exc) from exc

    # Writing.

    def _writing(self, key: str, chunks: Iterable[bytes | memoryview]) -> Callable[[BinaryIO], None]:
        def fill(out: BinaryIO) -> None:
            # Errors of the caller's stream surface from the iteration itself and pass unchanged.
            for chunk in chunks:
                view = memoryview(chunk)
                with self._translating("write", key):
                    for start in range(0, len(view), WRITE_BYTES):
                        out.write(view[start : start + WRITE_BYTES])

        return fill

    def _copy(self, source: int, out: BinaryIO, *, start: int, length: int, key: str) -> None:
        """`length` bytes of the open `source` from `start` into `out`, by the kernel when it can."""
        target = out.fileno()
        in_kernel = True
        copied = 0
        while copied < length:
            wanted = length - copied
            with self._translating("write", key):
                if in_kernel:
                    try:
                        count = os.copy_file_range(source, target, wanted, start + copied)
                    except OSError as exc:
                        # Another file system under the root, or one without the call: copy by hand.
                        if exc.errno not in _NO_KERNEL_COPY:
                            raise
                        in_kernel = False
                        continue
                else:
                    data = os.pread(source, min(wanted, WRITE_BYTES), start + copied)
                    count = out.write(data) if data else 0
            if count == 0:
                raise SizeMismatch(
                    f"cannot write {key!r} ({self.description}): the source ends before byte "
                    f"{start + length}; the previous object, if any, is kept"
                )
            copied += count

    @overload
    def _write(self, key: str, fill: Callable[[BinaryIO], None]) -> ObjectInfo: ...

    @overload
    def _write(self, key: str, fill: Callable[[BinaryIO], None], *, exclusive: bool) -> ObjectInfo | None: ...

    def _write(
        self, key: str, fill: Callable[[BinaryIO], None], *, exclusive: bool = False
    ) -> ObjectInfo | None:
        """Fill a temp file and put it at `key`: renamed over it, or (`exclusive`) linked to it only
        when the name is free (None when it is taken)."""
        path = self._path(key)
        with self._translating("write", key):
            descriptor, temp = self._create_temp(path.parent)
        created = True
        try:
            with os.fdopen(descriptor, "wb") as out:
                fill(out)
                with self._translating("write", key):
                    out.flush()
                    os.fsync(out.fileno())
                    status = os.fstat(out.fileno())
            with self._translating("write", key):
                if exclusive:
                    try:
                        os.link(temp, path)
                    except FileExistsError:
                        created = False
                    temp.unlink()
                else:
                    os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                temp.unlink()
            self._prune(path.parent)
            raise
        if not created:
            return None
        with self._translating("write", key):
            _fsync_directory(path.parent)
        # The renamed (or linked) file keeps the inode and mtime fstat saw, so this equals a later
        # head(); a link changes only the ctime, which the etag does not use.
        return _info(key, status)

    def _create_temp(self, directory: Path) -> tuple[int, Path]:
        # A concurrent delete may prune the directory between mkdir and open; make it again then.
        for _attempt in range(50):
            try:
                directory.mkdir(parents=True, exist_ok=True)
                temp = directory / f"{RESERVED_SEGMENT_PREFIX}{secrets.token_hex(8)}"
                return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), temp
            except (FileNotFoundError, FileExistsError):
                # mkdir itself races with a prune of the same (or a parent) directory; only a
                # file standing where a directory must be is a real collision.
                if _is_file_on_the_way(directory, self.root):
                    raise
                continue
        raise FileNotFoundError(errno.ENOENT, "directory keeps disappearing", str(directory))

    def _prune(self, directory: Path) -> None:
        while directory != self.root and directory.is_relative_to(self.root):
            try:
                directory.rmdir()
            except OSError:
                return  # not empty (or already gone): every ancestor is non-empty too
            directory = directory.parent

    # Reading.

    def _split_prefix(self, prefix: str) -> tuple[Path, str, str]:
        """`a/b/pa` -> (root/a/b, "a/b/", "pa"): the directory to scan and the name filter within it."""
        validate_prefix(prefix)
        directory_key, _, partial = prefix.rpartition("/")
        if not directory_key:
            return self.root, "", partial
        base = self.root.joinpath(*directory_key.split("/"))
        self._ensure_inside(base, prefix)
        return base, directory_key + "/", partial

    def _walk(self, directory: Path, key_prefix: str, partial: str = "") -> Iterator[ObjectInfo]:
        # Sort a directory as `name/` so keys come out in S3's order: `a-b` < `a/x` because '-' < '/'.
        entries = [
            (f"{name}/" if is_dir else name, is_dir, entry)
            for name, is_dir, entry in self._entries(directory, key_prefix)
            if (f"{name}/" if is_dir else name).startswith(partial)
        ]
        for sort_name, is_dir, entry in sorted(entries, key=lambda item: item[0]):
            if is_dir:
                yield from self._walk(Path(entry.path), key_prefix + sort_name)
                continue
            try:
                status = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # deleted since the scan
            except OSError as exc:
                raise self._failure("list", key_prefix + entry.name, exc) from exc
            yield _info(key_prefix + entry.name, status)

    def _entries(self, directory: Path, key_prefix: str) -> builtins.list[tuple[str, bool, os.DirEntry[str]]]:
        """Visible files and directories of `directory`: no temp files, no symbolic links."""
        try:
            with os.scandir(directory) as scan:
                found = builtins.list(scan)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise self._failure("list", key_prefix or None, exc) from exc
        visible = []
        for entry in found:
            # Links are skipped, not followed: one could lead out of the root.
            if entry.name.startswith(RESERVED_SEGMENT_PREFIX) or entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                visible.append((entry.name, True, entry))
            elif entry.is_file(follow_symlinks=False):
                visible.append((entry.name, False, entry))
        return visible

    # Paths and errors.

    def _path(self, key: str) -> Path:
        path = self.root.joinpath(*validate_key(key).split("/"))
        self._ensure_inside(path, key)
        return path

    def _ensure_inside(self, path: Path, key: str) -> None:
        # Keys cannot climb out (validated), but a symbolic link planted under the root could.
        root = os.path.realpath(self.root)
        if os.path.commonpath([root, os.path.realpath(path)]) != root:
            raise store_error(
                store=self.description,
                action="reach",
                key=key,
                cause="the path leads out of the store through a symbolic link",
                hint="remove the link from the store directory",
            )

    @contextlib.contextmanager
    def _translating(self, action: str, key: str) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            raise self._failure(action, key, exc) from exc

    def _failure(self, action: str, key: str | None, exc: OSError | Exception) -> ObjectStoreError:
        return store_error(store=self.description, action=action, key=key, cause=str(exc), hint=_hint(exc))


def _pieces(source: CountingSource) -> Iterator[memoryview]:
    """The source in pieces of one reused buffer: each piece is written before the next read."""
    buffer = memoryview(bytearray(COPY_CHUNK_BYTES))
    while count := source.readinto(buffer):
        yield buffer[:count]


def _info(key: str, status: os.stat_result) -> ObjectInfo:
    # Every write renames a fresh file over the key, so the inode changes with each version even
    # when the clock is too coarse for the mtime to.
    etag = f"{status.st_ino:x}-{status.st_mtime_ns:x}-{status.st_size:x}"
    modified = datetime.datetime.fromtimestamp(status.st_mtime_ns / 1e9, tz=datetime.UTC)
    return ObjectInfo(key=key, size=status.st_size, etag=etag, last_modified=modified)


def _fsync_directory(directory: Path) -> None:
    """Make the rename itself durable; cheap next to the file's own fsync."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _hint(exc: Exception) -> str:
    code = getattr(exc, "errno", None)
    if code in (errno.EACCES, errno.EPERM):
        return f"check that the store directory is writable by uid {os.getuid()}"
    if code == errno.ENOSPC:
        return f"the volume is full: free space or point {_STORE_URL} at a larger one"
    if code == errno.EROFS:
        return f"the file system is read-only: point {_STORE_URL} at a writable directory"
    if code in (errno.ENOTDIR, errno.EEXIST, errno.EISDIR):
        return (
            "the key collides with an existing object or prefix: the directory store cannot hold "
            "both 'a/b' and 'a/b/...'"
        )
    return f"check the directory named by {_STORE_URL}"


def _is_file_on_the_way(directory: Path, root: Path) -> bool:
    """Whether `directory` or one of its ancestors below `root` exists as something else than a directory."""
    current = directory
    while current != root and current.is_relative_to(root):
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            mode = None  # pruned meanwhile: nothing stands in the way
        # One lstat per level: exists() then is_dir() would race with the prune it is judging.
        if mode is not None and not stat.S_ISDIR(mode):
            return True
        current = current.parent
    return False
