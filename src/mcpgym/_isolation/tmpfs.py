"""A tmpfs of its own per workspace: the one bound on what sandboxed code stores in total
(RLIMIT_FSIZE bounds one file). Root only (`mount(2)`); `workspace_quota_works()` says whether
this process may.

Layer: OS plumbing, imports nothing from the package.
"""

from __future__ import annotations

import ctypes
import functools
import os
import tempfile
from pathlib import Path

_MS_NOSUID, _MS_NODEV, _MS_SHARED, _MNT_DETACH = 2, 4, 1 << 20, 2
_LIBC = ctypes.CDLL(None, use_errno=True)


@functools.cache
def workspace_quota_works() -> bool:
    """Whether this process may mount a size-limited tmpfs for each workspace (probed once)."""
    probe = Path(tempfile.mkdtemp(prefix="mcpgym-probe-"))
    try:
        _mount_tmpfs(probe, "size=4096,nr_inodes=8")
    except OSError:
        return False
    else:
        unmount(probe)
        return True
    finally:
        probe.rmdir()


def mount_tmpfs(path: Path, quota: tuple[int, int], options: str) -> None:
    """Mount a tmpfs of `quota` (bytes, inodes) on `path` (root only)."""
    _mount_tmpfs(path, f"size={quota[0]},nr_inodes={quota[1]},{options}")


def _mount_tmpfs(path: Path, options: str) -> None:
    if _LIBC.mount(b"tmpfs", os.fsencode(path), b"tmpfs", _MS_NOSUID | _MS_NODEV, options.encode()) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(path))


def make_shared(path: Path) -> None:
    """Mark the mount at `path` shared: mounts made below it later also appear in sandboxes that
    bind it (bwrap's copies are its slaves)."""
    if _LIBC.mount(None, os.fsencode(path), None, _MS_SHARED, None) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(path))


def unmount(path: Path) -> None:
    # Lazy: a process still holding a descriptor there cannot keep the mount (or its RAM) pinned
    # in our namespace; the memory goes with the last reference.
    if _LIBC.umount2(os.fsencode(path), _MNT_DETACH) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(path))
