"""Real read-only bind mounts (nodecache/mounts.py): these tests run as root, as the plugin does."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import pytest

from ai_models.nodecache import mounts
from ai_models.nodecache.mounts import (
    MountError,
    bind_read_only,
    mount_at,
    parse_mountinfo,
    same_tree,
    unmount,
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    source = tmp_path / "objects" / "tree"
    (source / "sub").mkdir(parents=True)
    (source / "config.json").write_text('{"model": true}')
    (source / "sub" / "weights.bin").write_bytes(b"\0" * 1024)
    return source


@pytest.fixture
def target(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "pods" / "uid" / "volumes" / "kubernetes.io~csi" / "model" / "mount"
    path.mkdir(parents=True)
    yield path
    unmount(path)  # a failed assertion must not leave a mount behind in the test's tmp_path


def test_bind_read_only_shows_the_tree_and_refuses_writes(tree: Path, target: Path) -> None:
    bind_read_only(tree, target)
    assert (target / "config.json").read_text() == '{"model": true}'
    assert same_tree(target, tree)
    with pytest.raises(OSError, match="Read-only file system") as raised:
        (target / "config.json").write_text("changed")
    assert raised.value.errno == errno.EROFS
    with pytest.raises(OSError, match="Read-only file system") as raised:
        (target / "new").mkdir()
    assert raised.value.errno == errno.EROFS
    (tree / "still-writable").write_text("the cache keeps its own view")  # only the bind is read-only


def test_the_mount_is_read_only_nosuid_nodev_in_mountinfo(tree: Path, target: Path) -> None:
    bind_read_only(tree, target)
    mount = mount_at(target)
    assert mount is not None
    assert {"ro", "nosuid", "nodev"} <= mount.options
    assert mount.read_only


def test_unmount_removes_stacked_mounts_and_leaves_a_plain_directory_alone(tree: Path, target: Path) -> None:
    unmount(target)  # not a mount point: nothing to do
    bind_read_only(tree, target)
    bind_read_only(tree, target)
    unmount(target)
    assert mount_at(target) is None
    assert not (target / "config.json").exists()
    assert target.is_dir()


def test_a_failed_remount_is_undone(tree: Path, target: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel refusing the remount is hard to provoke; the bind and its undo stay real.
    real_mount = mounts._mount

    def remount_refused(source: Path | None, path: Path, flags: int, *, what: str) -> None:
        if flags & mounts.MS_REMOUNT:
            raise MountError(errno.EACCES, f"{what} at {path} failed: refused")
        real_mount(source, path, flags, what=what)

    monkeypatch.setattr(mounts, "_mount", remount_refused)
    with pytest.raises(MountError, match="read-only remount"):
        bind_read_only(tree, target)
    assert mount_at(target) is None  # no writable view of the cache stays behind


def test_a_missing_target_is_a_mount_error_naming_it(tree: Path, tmp_path: Path) -> None:
    with pytest.raises(MountError, match=r"bind mount of .* at .*absent failed: No such file"):
        bind_read_only(tree, tmp_path / "absent")


def test_same_tree_tells_another_tree_and_a_missing_path(tree: Path, target: Path, tmp_path: Path) -> None:
    other = tmp_path / "objects" / "other"
    other.mkdir()
    bind_read_only(other, target)
    assert not same_tree(target, tree)
    assert not same_tree(tmp_path / "absent", tree)


def test_paths_with_spaces_are_found(tree: Path, tmp_path: Path) -> None:
    spaced = tmp_path / "a dir\twith\\escapes"
    spaced.mkdir()
    try:
        bind_read_only(tree, spaced)
        assert mount_at(spaced) is not None
    finally:
        unmount(spaced)
    assert mount_at(spaced) is None


def test_parse_mountinfo_decodes_octal_escapes() -> None:
    line = (
        r"812 27 254:0 /var/cache/objects/a\040b /var/lib/kubelet/pods/u/volumes/x\134y/mount "
        r"ro,nosuid,nodev,relatime shared:1 - ext4 /dev/vda rw"
    )
    (mount,) = parse_mountinfo(line + "\n\n")
    assert mount.mount_id == 812
    assert mount.device == "254:0"
    assert mount.root == "/var/cache/objects/a b"
    assert mount.mount_point == "/var/lib/kubelet/pods/u/volumes/x\\y/mount"
    assert mount.options == {"ro", "nosuid", "nodev", "relatime"}
