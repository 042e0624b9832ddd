"""Kernel calls the sandboxed programs make on themselves: seccomp, namespaces, dumpable.

Layer: sandbox side, stdlib only. Its source is put in front of `_worker.py` and `_zygote.py`
(see `_sandbox._PROGRAMS`), so its names are globals there; the server imports only
`seccomp_program()`, to hand bubblewrap the same filter (`bwrap --seccomp FD`). No `from
__future__` import here or in those programs: the sources are concatenated. ctypes is imported
on first use: a worker under bwrap never needs it (it costs milliseconds of start-up).

- `seccomp_program()` / `block_user_namespaces()`: a seccomp filter that fails `unshare`/`clone`
  asking for a new user namespace, and `setns` into one (or into whatever the fd is), with
  EPERM, and `clone3` with ENOSYS (its flags sit behind a pointer a filter cannot read; libc then
  falls back to `clone`). With `no_new_privs`, so no set-uid program regains anything either.
  Inside a user namespace sandboxed code would be uid 0 with every capability over it (tmpfs
  mounts, netfilter, more kernel surface). Installed by bwrap for a worker, by the worker itself
  otherwise, and once by the grader zygote (inherited by every child).
- `unshare()`, `setns()`, `set_dumpable()`: what the grader uses to give every submission its
  own pid and IPC namespaces and to keep its test process out of reach.
"""

import os

# Not `typing` at run time (nor `struct` until used): the worker starts ~2 ms faster without them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 4, 38, 22, 2

# (audit arch, unshare, clone, clone3, setns) per machine
_SYSCALLS = {
    "x86_64": (0xC000003E, 272, 56, 435, 308),
    "aarch64": (0xC00000B7, 97, 220, 435, 268),
}
_LOADED: "list[Any]" = []  # ctypes' libc, once loaded


def _libc() -> "Any":
    if not _LOADED:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        for name in ("prctl", "unshare", "setns"):
            getattr(libc, name)  # looked up (dlsym, ~0.1 ms each) once, not in every forked child
        _LOADED.append(libc)
    return _LOADED[0]


def _check(result: int, what: str) -> None:
    if result != 0:
        import ctypes

        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def unshare(flags: int) -> None:
    _check(_libc().unshare(flags), "unshare")


def setns(fd: int, kind: int) -> None:
    _check(_libc().setns(fd, kind), "setns")


def set_dumpable(on: bool) -> None:
    """Off: processes of the same uid can neither ptrace this one nor open its /proc files (fds, memory)."""
    _check(_libc().prctl(_PR_SET_DUMPABLE, int(on), 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


def seccomp_program() -> bytes:
    """The filter as classic BPF (what `bwrap --seccomp` reads); empty on an unknown machine."""
    import struct

    numbers = _SYSCALLS.get(os.uname().machine)
    if numbers is None:
        return b""
    arch, unshare_nr, clone_nr, clone3_nr, setns_nr = numbers
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


def block_user_namespaces() -> bool:
    """Install the filter on this process (inherited by its children); False on an unknown machine."""
    import ctypes
    import struct

    libc = _libc()
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    code = seccomp_program()
    if not code:
        return False
    buffer = ctypes.create_string_buffer(code, len(code))
    program = struct.pack("HxxxxxxP", len(code) // 8, ctypes.addressof(buffer))
    _check(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, program, 0, 0), "prctl(PR_SET_SECCOMP)")
    return True
