"""Read-only bind mounts of cached trees into kubelet's volume targets, through mount(2) itself.

The image is distroless (no `mount` binary) and the plugin must not depend on one, so the calls go
to libc with ctypes. A publish is two calls: a bind mount, then a remount of that bind with
`ro,nosuid,nodev` (Linux ignores the flags on the first call of a bind). If the remount fails the
bind is undone at once: a writable view of the cache must never stay behind. Whether a path is a
mount point, and with which options, is read from /proc/self/mountinfo (its octal escapes decoded),
which also sees mounts a previous plugin process made.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import os
import re
from pathlib import Path
from typing import Final

MS_RDONLY: Final = 0x1
MS_NOSUID: Final = 0x2
MS_NODEV: Final = 0x4
MS_REMOUNT: Final = 0x20
MS_BIND: Final = 0x1000
UMOUNT_NOFOLLOW: Final = 0x8
READ_ONLY_REMOUNT: Final = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV
MOUNTINFO: Final = Path("/proc/self/mountinfo")
# More mounts stacked on one target than this is not what a plugin leaves: stop and say so.
MAX_STACKED: Final = 16

_ESCAPE = re.compile(r"\\([0-7]{3})")


class MountError(OSError):
    """A mount(2) or umount2(2) call failed; the message names the call, the path and the fix."""


@dataclasses.dataclass(frozen=True)
class MountPoint:
    """One line of /proc/self/mountinfo: where, from which filesystem path, with which options."""

    mount_id: int
    device: str  # major:minor
    root: str  # the path inside its filesystem that is mounted here
    mount_point: str
    options: frozenset[str]  # per-mount options: ro, nosuid, nodev...

    @property
    def read_only(self) -> bool:
        return "ro" in self.options


def parse_mountinfo(text: str) -> list[MountPoint]:
    """Every mount in the order the kernel lists them (a later one at the same path is on top)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 6:
            continue
        mounts.append(
            MountPoint(
                mount_id=int(fields[0]),
                device=fields[2],
                root=_unescape(fields[3]),
                mount_point=_unescape(fields[4]),
                options=frozenset(fields[5].split(",")),
            )
        )
    return mounts


def mount_at(path: Path | str, *, mountinfo: Path = MOUNTINFO) -> MountPoint | None:
    """The topmost mount whose mount point is exactly `path` (as given, normalized), or None."""
    wanted = os.path.normpath(str(path))
    found = None
    for mount in parse_mountinfo(mountinfo.read_text(encoding="utf-8", errors="surrogateescape")):
        if mount.mount_point == wanted:
            found = mount
    return found


def bind_read_only(source: Path, target: Path) -> None:
    """Bind-mount `source` at `target` (an existing directory) read-only, nosuid, nodev."""
    _mount(source, target, MS_BIND, what="bind mount")
    try:
        _mount(
            None, target, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, what="read-only remount"
        )
    except MountError:
        unmount(target)
        raise


def same_tree(target: Path, tree: Path) -> bool:
    """`target` shows `tree` (a bind mount shows the very directory: same device and inode)."""
    try:
        shown, expected = os.stat(target), os.stat(tree)
    except OSError:
        return False
    return (shown.st_dev, shown.st_ino) == (expected.st_dev, expected.st_ino)


def unmount(target: Path) -> None:
    """Unmount every mount stacked at `target`; a path that is no mount point is left as it is."""
    for _ in range(MAX_STACKED):
        if mount_at(target) is None:
            return
        if _libc().umount2(os.fsencode(target), UMOUNT_NOFOLLOW) != 0:
            code = ctypes.get_errno()
            if code == errno.EINVAL:  # gone between the read and the call
                continue
            raise MountError(code, f"umount2 of {target} failed: {os.strerror(code)}{_hint(code)}")
    raise MountError(
        errno.ELOOP, f"{target} still has mounts after {MAX_STACKED} unmounts; unmount it by hand"
    )


def _mount(source: Path | None, target: Path, flags: int, *, what: str) -> None:
    result = _libc().mount(
        os.fsencode(source) if source is not None else None, os.fsencode(target), None, flags, None
    )
    if result != 0:
        code = ctypes.get_errno()
        origin = f" of {source}" if source is not None else ""
        raise MountError(code, f"{what}{origin} at {target} failed: {os.strerror(code)}{_hint(code)}")


def _hint(code: int) -> str:
    if code == errno.EPERM:
        return " (mounting needs CAP_SYS_ADMIN: the node-cache container runs privileged as root)"
    return ""


_LIBC: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _LIBC  # noqa: PLW0603  (loaded once, on first use)
    if _LIBC is None:
        # glibc's soname, loaded directly: ctypes.util.find_library would run ldconfig or gcc,
        # which a distroless image does not have.
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.mount.argtypes = (
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_ulong,
            ctypes.c_void_p,
        )
        libc.mount.restype = ctypes.c_int
        libc.umount2.argtypes = (ctypes.c_char_p, ctypes.c_int)
        libc.umount2.restype = ctypes.c_int
        _LIBC = libc
    return _LIBC


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash in paths as \\040, \\011, \\012, \\134."""
    return _ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), field)
