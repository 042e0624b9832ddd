"""An episode's workspace directory, and file access that cannot leave it.

Layer: file system only. The file tools run in the server process (with the server's
rights), while sandboxed code can plant symlinks, FIFOs or devices in the workspace, so
every path is walked one component at a time with `O_NOFOLLOW` from a directory descriptor:
`..`, absolute paths and symlinks are refused, not resolved.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import itertools
import json
import logging
import os
import re
import stat
import tempfile
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

import anyio

from mcpgym._isolation.tmpfs import make_shared, mount_tmpfs, unmount, workspace_quota_works
from mcpgym._isolation.tree import remove_tree

__all__ = [
    "Workspace",
    "WorkspaceError",
    "make_shared",
    "mount_tmpfs",
    "remove_tree",
    "shown",
    "unmount",
    "workspace_quota_works",
]

logger = logging.getLogger("mcpgym.servers.coding")

_MAX_LISTED = 1000
_MAX_DEPTH = 32
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class WorkspaceError(ValueError):
    """A path the agent gave is not a file it may use; the message says why."""


class Workspace:
    """A private directory, writable by the sandbox's uid, removed by `remove()`.

    With a `quota` (bytes, files) it is a tmpfs of that size: the only bound on what sandboxed
    code may store in total (RLIMIT_FSIZE bounds one file). It is RAM, counted by no rlimit.
    """

    def __init__(
        self, uid: int | None, read_limit: int, quota: tuple[int, int] | None = None, *, parent: Path | None = None
    ) -> None:
        # `parent`: the server's scratch directory (`_scratch.directory()`), so that a server
        # started after this one died removes what it left.
        self.root = Path(tempfile.mkdtemp(prefix="ws-" if parent else "mcpgym-ws-", dir=parent))
        self.uid = uid
        self.read_limit = read_limit
        if quota is not None:
            owner = uid if uid is not None else os.geteuid()
            try:
                mount_tmpfs(self.root, quota, f"mode=0700,uid={owner},gid={owner}")
            except OSError:
                self.root.rmdir()
                raise
        elif uid is not None:
            os.chown(self.root, uid, uid)

    def write(self, path: str, content: str, max_bytes: int) -> int:
        data = content.encode()
        if len(data) > max_bytes:
            raise WorkspaceError(f"{path}: {len(data)} bytes is over the file size limit of {max_bytes} bytes")
        *parents, name = _parts(path)
        with self._directory(parents, create=True) as dir_fd:
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            fd = _open(path, name, flags, dir_fd)
            try:
                _require_regular(path, fd)
                view = memoryview(data)
                try:
                    while view:
                        view = view[os.write(fd, view) :]
                except OSError as exc:  # ENOSPC: the workspace is full
                    raise WorkspaceError(_why(path, exc)) from None
                if self.uid is not None:
                    os.fchown(fd, self.uid, self.uid)
            finally:
                os.close(fd)
        return len(data)

    def read(self, path: str) -> tuple[str, int]:
        """The text of a file (up to the read limit) and how many bytes were left out."""
        *parents, name = _parts(path)
        with self._directory(parents, create=False) as dir_fd:
            fd = _open(path, name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd)
            try:
                size = _require_regular(path, fd)
                data = os.read(fd, self.read_limit)
            finally:
                os.close(fd)
        return data.decode(errors="replace"), max(size - len(data), 0)

    def read_whole(self, path: str, max_bytes: int) -> str:
        """The whole text of a file; a file over `max_bytes` is refused, never cut."""
        *parents, name = _parts(path)
        with self._directory(parents, create=False) as dir_fd:
            fd = _open(path, name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd)
            try:
                size = _require_regular(path, fd)
                if size > max_bytes:
                    raise WorkspaceError(f"{path}: {size} bytes is over the limit of {max_bytes} bytes")
                data = os.read(fd, max_bytes + 1)
            finally:
                os.close(fd)
        if len(data) > max_bytes:  # grew after the fstat
            raise WorkspaceError(f"{path}: over the limit of {max_bytes} bytes")
        return data.decode(errors="replace")

    def list(self, path: str = ".") -> builtins.list[str]:
        """Entries under `path`, recursively, directories marked with a trailing `/`."""
        parts = [] if path.strip() in ("", ".", "./") else _parts(path)
        with self._directory(parts, create=False) as dir_fd, contextlib.closing(_walk(dir_fd, "")) as walk:
            names = list(itertools.islice(walk, _MAX_LISTED + 1))
        if len(names) > _MAX_LISTED:
            names = [*names[:_MAX_LISTED], f"[... more than {_MAX_LISTED} entries; list a subdirectory ...]"]
        return names

    @contextmanager
    def _directory(self, parts: builtins.list[str], *, create: bool) -> Iterator[int]:
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for part in parts:
                if create:
                    try:
                        os.mkdir(part, 0o755, dir_fd=fd)
                        if self.uid is not None:
                            os.chown(part, self.uid, self.uid, dir_fd=fd, follow_symlinks=False)
                    except FileExistsError:
                        pass  # already there; the O_NOFOLLOW open below checks what it is
                child = _open(part, part, _DIR_FLAGS, fd)
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    async def remove(self) -> None:
        await anyio.to_thread.run_sync(remove_tree, self.root)


def _parts(path: str) -> list[str]:
    pure = PurePosixPath(path)
    if pure.is_absolute():
        raise WorkspaceError(f"{path}: absolute paths are not allowed; use a path relative to the workspace")
    parts = [p for p in pure.parts if p != "."]
    if not parts:
        raise WorkspaceError("empty path: name a file in the workspace, e.g. solution.py")
    if ".." in parts:
        raise WorkspaceError(f"{path}: '..' is not allowed; paths stay inside the workspace")
    if any("\0" in p for p in parts):
        raise WorkspaceError(f"{path}: NUL bytes are not allowed in paths")
    return parts


def _open(shown: str, name: str, flags: int, dir_fd: int) -> int:
    try:
        return os.open(name, flags, 0o644, dir_fd=dir_fd)
    except OSError as exc:
        raise WorkspaceError(_why(shown, exc)) from None


def _why(path: str, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return f"{path}: is a symbolic link; the file tools do not follow links"
    if exc.errno == errno.ENOTDIR:
        return f"{path}: a parent is not a directory (symbolic links to directories are not followed)"
    if exc.errno == errno.ENOENT:
        return f"{path}: no such file or directory in the workspace"
    if exc.errno == errno.ENXIO:  # a FIFO or socket with nobody on the other end
        return f"{path}: not a regular file"
    if exc.errno == errno.EISDIR:
        return f"{path}: is a directory"
    return f"{path}: {exc.strerror}"


def _require_regular(path: str, fd: int) -> int:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise WorkspaceError(f"{path}: not a regular file")
    return info.st_size


def _walk(dir_fd: int, prefix: str) -> Generator[str, None, None]:
    """Entries under `dir_fd`, depth first, sorted; not below `_MAX_DEPTH` levels (iterative:
    sandboxed code can nest directories deeper than Python's recursion limit)."""
    stack: list[tuple[int, Iterator[os.DirEntry[str]], str]] = [(dir_fd, _entries(dir_fd), prefix)]
    try:
        while stack:
            fd, entries, prefix = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                if fd != dir_fd:
                    os.close(fd)
                continue
            name = prefix + shown(entry.name)
            if entry.is_symlink():
                yield f"{name} -> (symbolic link, not followed)"
            elif not entry.is_dir(follow_symlinks=False):
                yield name
            elif len(stack) >= _MAX_DEPTH:
                yield f"{name}/ [... deeper than {_MAX_DEPTH} levels: list this directory ...]"
            else:
                yield name + "/"
                child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                stack.append((child, _entries(child), name + "/"))
    finally:
        for fd, _, _ in stack:
            if fd != dir_fd:
                os.close(fd)


_PLAIN = re.compile(r"[^\x00-\x1f\x7f\\\"]+")


def shown(name: str) -> str:
    """A file name as a listing shows it: as it is when that is unambiguous, else as a JSON string
    (a name holding a newline would otherwise read as two entries, one with ' -> ' as a link)."""
    if _PLAIN.fullmatch(name) and " -> " not in name and not name.startswith(("[", " ")) and not name.endswith(" "):
        return name
    return json.dumps(name)


def _entries(fd: int) -> Iterator[os.DirEntry[str]]:
    with os.scandir(fd) as entries:
        return iter(sorted(entries, key=lambda e: e.name))
