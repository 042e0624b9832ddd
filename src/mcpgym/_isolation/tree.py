"""Removing a directory tree that sandboxed code made: iteratively (it can nest directories
deeper than Python's recursion limit) and never outside the tree.

Layer: OS plumbing, imports nothing from the package but `tmpfs`.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

from mcpgym._isolation.tmpfs import unmount

logger = logging.getLogger("mcpgym.isolation")

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(root: Path) -> None:
    """Delete a workspace; what cannot be deleted is logged (a leak to report, not to hide)."""
    if os.path.ismount(root):
        try:
            unmount(root)  # its content goes with it, however deep
            root.rmdir()
        except OSError as exc:
            logger.warning("could not remove %s: %s", root, exc)
        return
    try:
        _remove_tree(root)
    except OSError as exc:
        logger.warning("could not remove %s: %s", root, exc)


def _remove_tree(root: Path) -> None:
    """Delete depth first holding one directory descriptor, without recursion (sandboxed code
    can nest directories deeper than Python's recursion limit).

    Climbing back up goes through `..`, which follows the directory wherever it now is: code
    still running as the sandbox's uid could move the directory we are in out of the tree (to
    its own directory elsewhere), and an unchecked climb would then empty directories that
    are not ours. So every `..` must be the very directory (device and inode) we came down
    from, or the removal stops there.
    """
    fd = os.open(root, _DIR_FLAGS)
    names: list[str] = []  # the path from `root` down to `fd`
    above: list[tuple[int, int]] = []  # (st_dev, st_ino) of each directory on that path
    try:
        while True:
            below = None
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        below = entry.name
                        break
                    os.unlink(entry.name, dir_fd=fd)
            if below is not None:
                child = os.open(below, _DIR_FLAGS, dir_fd=fd)
                info = os.fstat(fd)
                above.append((info.st_dev, info.st_ino))
                os.close(fd)
                fd = child
                names.append(below)
            elif names:
                parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = parent
                info = os.fstat(fd)
                if (info.st_dev, info.st_ino) != above.pop():
                    raise OSError(errno.EXDEV, "a directory was moved out of the tree while it was being removed")
                os.rmdir(names.pop(), dir_fd=fd)
            else:
                break
    finally:
        os.close(fd)
    root.rmdir()
