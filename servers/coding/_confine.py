"""Kernel calls the sandboxed programs make on themselves: seccomp, namespaces, mounts, dumpable.

Layer: sandbox side, stdlib only. Never imported by the server at run time: its source is put
in front of `_worker.py` and `_zygote.py` (see `_sandbox.program`), so its names are globals
there. No `from __future__` import here or in those programs: the sources are concatenated.

- `block_user_namespaces()`: a seccomp filter that fails `unshare`/`clone` asking for a new
  user namespace, and `setns` into one (or into whatever the fd is), with EPERM, and `clone3`
  with ENOSYS (its flags sit behind a pointer a filter cannot read; libc then falls back to
  `clone`). Installed once by the worker and by the grader zygote, inherited by every child. With `no_new_privs` set, so
  no set-uid program regains anything either. Inside a user namespace sandboxed code would be
  uid 0 with every capability over it (tmpfs mounts, netfilter, more kernel surface).
- `unshare()`, `mount()`, `set_dumpable()`: what the grader uses to give every submission its
  own pid, IPC and mount namespaces and to keep its test process out of reach.
"""

import ctypes
import os
import platform
import struct

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 0x40000
_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 4, 38, 22, 2
_LIBC = ctypes.CDLL(None, use_errno=True)

# (audit arch, unshare, clone, clone3, setns) per machine
_SYSCALLS = {
    "x86_64": (0xC000003E, 272, 56, 435, 308),
    "aarch64": (0xC00000B7, 97, 220, 435, 268),
}


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def unshare(flags: int) -> None:
    _check(_LIBC.unshare(flags), "unshare")


def setns(fd: int, kind: int) -> None:
    _check(_LIBC.setns(fd, kind), "setns")


def mount(source: str | None, target: str, kind: str | None, flags: int, data: str | None = None) -> None:
    _check(_LIBC.mount(_bytes(source), target.encode(), _bytes(kind), flags, _bytes(data)), f"mount {target}")


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def set_dumpable(on: bool) -> None:
    """Off: processes of the same uid can neither ptrace this one nor open its /proc files (fds, memory)."""
    _check(_LIBC.prctl(_PR_SET_DUMPABLE, int(on), 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


def _filter(arch: int, unshare_nr: int, clone_nr: int, clone3_nr: int, setns_nr: int) -> bytes:
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    ld, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    program = [
        (ld, 0, 0, 4),  # 0: seccomp_data.arch
        (jeq, 1, 0, arch),  # 1
        (ret, 0, 0, allow),  # 2: another ABI: not ours to judge
        (ld, 0, 0, 0),  # 3: seccomp_data.nr
        (jeq, 0, 1, clone3_nr),  # 4
        (ret, 0, 0, enosys),  # 5
        (jeq, 0, 3, setns_nr),  # 6
        (ld, 0, 0, 24),  # 7: setns's args[1], low 32 bits: the namespace type (0: whatever the fd is)
        (jeq, 5, 0, 0),  # 8: -> 14
        (jset, 4, 5, CLONE_NEWUSER),  # 9: -> 14 / 15
        (jeq, 1, 0, unshare_nr),  # 10: -> 12
        (jeq, 0, 3, clone_nr),  # 11: -> 12 / 15
        (ld, 0, 0, 16),  # 12: args[0], low 32 bits: the namespace flags of unshare and clone
        (jset, 0, 1, CLONE_NEWUSER),  # 13: -> 14 / 15
        (ret, 0, 0, eperm),  # 14
        (ret, 0, 0, allow),  # 15
    ]
    return b"".join(struct.pack("HBBI", *op) for op in program)


_NUMBERS = _SYSCALLS.get(platform.machine())
_CODE = _filter(*_NUMBERS) if _NUMBERS is not None else b""
for _name in ("prctl", "unshare", "setns", "mount"):
    getattr(_LIBC, _name)  # looked up (dlsym, ~0.1 ms each) once here, not in every forked child


def block_user_namespaces() -> bool:
    """Install the filter on this process (inherited by its children); False on an unknown machine."""
    _check(_LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    if not _CODE:
        return False
    code = _CODE
    buffer = ctypes.create_string_buffer(code, len(code))
    program = struct.pack("HxxxxxxP", len(code) // 8, ctypes.addressof(buffer))
    _check(_LIBC.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, program, 0, 0), "prctl(PR_SET_SECCOMP)")
    return True
