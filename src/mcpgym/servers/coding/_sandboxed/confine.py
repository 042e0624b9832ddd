"""Kernel calls the sandboxed programs make on themselves: seccomp, namespaces, dumpable.

Layer: sandbox side, stdlib only. Its source is put in front of `_worker.py` and `_zygote.py`
(see `_sandbox._PROGRAMS`), so its names are globals there; the server imports only
`seccomp_program()`, to hand bubblewrap the same filter (`bwrap --seccomp FD`). No `from
__future__` import here or in those programs: the sources are concatenated. ctypes is imported
on first use: a worker under bwrap never needs it (it costs milliseconds of start-up).

- `seccomp_program()` / `block_user_namespaces()`: a seccomp filter that fails `unshare`/`clone`
  asking for a new user namespace, and `setns` into one (or into whatever the fd is), with
  EPERM, and `clone3` with ENOSYS (its flags sit behind a pointer a filter cannot read; libc then
  falls back to `clone`); also the kernel keyrings, io_uring and other ABIs (see the function).
  With `no_new_privs`, so no set-uid program regains anything either.
  Inside a user namespace sandboxed code would be uid 0 with every capability over it (tmpfs
  mounts, netfilter, more kernel surface). Installed by bwrap for a worker, by the worker itself
  otherwise, and once by the grader zygote (inherited by every child).
- `unshare()`, `setns()`, `set_dumpable()`: what the grader uses to give every submission its
  own pid and IPC namespaces and to keep its test process out of reach.
"""

import os
import sys

# Not `typing` at run time (nor `struct` until used): the worker starts ~2 ms faster without them.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 1, 4, 38, 22, 2
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT = 1, 2, 4, 8, 32
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18
_MNT_DETACH = 2
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
HELD_FD = 1000  # import directories held open for a uid that cannot reach them by path (`hold_imports`)

# (audit arch, unshare, clone, clone3, setns, (add_key, request_key, keyctl), io_uring_setup) per machine
_SYSCALLS = {
    "x86_64": (0xC000003E, 272, 56, 435, 308, (248, 249, 250), 425),
    "aarch64": (0xC00000B7, 97, 220, 435, 268, (217, 218, 219), 425),
}
_X32 = 0x40000000  # x86_64's x32 ABI: the same syscalls under other numbers
_LOADED: "list[Any]" = []  # ctypes' libc, once loaded


def _libc() -> "Any":
    if not _LOADED:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        for name in ("prctl", "unshare", "setns", "mount", "umount2", "syscall"):
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
    """The filter as classic BPF (what `bwrap --seccomp` reads); empty on an unknown machine.

    Besides user namespaces: another ABI's syscalls (int 0x80, x32: the same calls under numbers
    the filter does not check) fail with ENOSYS, and so does io_uring (whose operations open
    sockets and files past any syscall filter); the kernel keyrings (`add_key`, `request_key`,
    `keyctl`), which a uid keeps after its processes end and whose keys one uid may open to
    another (a channel between concurrent episodes), fail with EPERM."""
    import struct

    numbers = _SYSCALLS.get(os.uname().machine)
    if numbers is None:
        return b""
    arch, unshare_nr, clone_nr, clone3_nr, setns_nr, keyrings, io_uring_nr = numbers
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    ops: list[tuple[int, str | None, str | None, int]] = []  # (code, jump if true, if false, k)
    labels: dict[str, int] = {}

    def emit(code: int, k: int, yes: str | None = None, no: str | None = None) -> None:
        ops.append((code, yes, no, k))

    emit(ld, 4)  # seccomp_data.arch
    emit(jeq, arch, no="enosys")
    emit(ld, 0)  # seccomp_data.nr
    if arch == 0xC000003E:
        emit(jge, _X32, yes="enosys")
    for number in keyrings:
        emit(jeq, number, yes="eperm")
    for number in (clone3_nr, io_uring_nr):  # clone3's flags sit behind a pointer: libc falls back to clone
        emit(jeq, number, yes="enosys")
    emit(jeq, setns_nr, yes="setns")
    emit(jeq, unshare_nr, yes="flags")
    emit(jeq, clone_nr, yes="flags")
    emit(ret, allow)
    labels["setns"] = len(ops)
    emit(ld, 24)  # setns's args[1], low 32 bits: the namespace type (0: whatever the fd is)
    emit(jeq, 0, yes="eperm")
    emit(jset, CLONE_NEWUSER, yes="eperm", no="allow")
    labels["flags"] = len(ops)
    emit(ld, 16)  # args[0], low 32 bits: the namespace flags of unshare and clone
    emit(jset, CLONE_NEWUSER, yes="eperm", no="allow")
    for name, verdict in (("allow", allow), ("eperm", eperm), ("enosys", enosys)):
        labels[name] = len(ops)
        emit(ret, verdict)

    def offset(at: int, label: str | None) -> int:
        return 0 if label is None else labels[label] - at - 1

    return b"".join(
        struct.pack("HBBI", code, offset(at, yes), offset(at, no), k) for at, (code, yes, no, k) in enumerate(ops)
    )


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


def _mount(source: "str | None", target: str, fstype: "str | None", flags: int, data: "str | None" = None) -> None:
    import ctypes

    libc = _libc()
    libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p)
    encoded = [None if text is None else os.fsencode(text) for text in (source, target, fstype, data)]
    _check(libc.mount(encoded[0], encoded[1], encoded[2], flags, encoded[3]), f"mount {target}")


def _detach(target: str) -> None:
    _check(_libc().umount2(os.fsencode(target), _MNT_DETACH), f"umount {target}")


def _pivot_root(new: str, old: str) -> None:
    number = _PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(38, f"pivot_root: unknown machine {os.uname().machine}")
    _check(_libc().syscall(number, os.fsencode(new), os.fsencode(old)), "pivot_root")


def _read_only(target: str, devices: bool = False) -> None:
    _mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | (0 if devices else _MS_NODEV))


def private_root(view: "dict[str, Any]") -> None:
    """Make this mount namespace's root a new, mostly read-only tree holding only what `view`
    lists, as bubblewrap does (root, in a mount namespace of our own whose mounts are slaves of
    the host's: nothing done here is seen outside). `view`: `ro` [[source, path]], `links`
    [[target, path]], `masks` [path] (covered by /dev/null), `workspace` [source, path]. Plus
    /proc (this pid namespace's), a /dev of a few devices, and an empty read-only /tmp.

    Built in a tmpfs that is first made the root (the host's tree then at /oldroot, where every
    source is found by its own path, /tmp's included), then pivoted into; the host's tree is
    detached before any sandboxed code runs."""
    mask = os.umask(0o022)
    try:
        _mount("tmpfs", "/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755")
        os.chdir("/tmp")
        os.mkdir("newroot")
        _mount("newroot", "newroot", None, _MS_BIND | _MS_REC)
        os.mkdir("oldroot")
        _pivot_root("/tmp", "oldroot")
        os.chdir("/")
        _build("/oldroot", "/newroot", view)
        _mount("oldroot", "/oldroot", None, _MS_REC | _MS_PRIVATE)  # its unmount must not propagate
        _detach("/oldroot")
        os.chdir("/newroot")
        _pivot_root(".", ".")  # the new tree on top of the old root, which is then detached
        _detach(".")
        os.chdir("/")
        _read_only("/")
    finally:
        os.umask(mask)


def _build(old: str, new: str, view: "dict[str, Any]") -> None:
    read_only = []
    for source, path in view["ro"]:
        _bind(old + source, new + path)
        read_only.append(new + path)
    for target, path in view["links"]:
        os.symlink(target, new + path)
    source, path = view["workspace"]
    _bind(old + source, new + path)
    for path in view["masks"]:
        if os.path.lexists(new + path):
            _mount(old + "/dev/null", new + path, None, _MS_BIND)
    os.mkdir(new + "/proc")
    _mount("proc", new + "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    os.mkdir(new + "/dev")
    _mount("tmpfs", new + "/dev", "tmpfs", _MS_NOSUID, "mode=0755,size=65536,nr_inodes=64")
    for name in _DEVICES:
        if os.path.exists(f"{old}/dev/{name}"):
            _bind(f"{old}/dev/{name}", f"{new}/dev/{name}")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "0"), ("stdout", "1"), ("stderr", "2")):
        os.symlink(target if name == "fd" else f"/proc/self/fd/{target}", f"{new}/dev/{name}")
    read_only.append(new + "/dev")
    os.mkdir(new + "/tmp")  # read-only with the root: sandboxed code writes to its workspace
    # Submounts of a read-only tree (/etc/hosts in a container, say) are read-only too.
    with open(old + "/proc/self/mountinfo", "rb") as table:
        points = [os.fsdecode(line.split(b" ", 5)[4]) for line in table]
    for point in points:
        point = point.replace("\\040", " ")
        if point not in read_only and any(point.startswith(top + "/") for top in read_only):
            _read_only(point, devices=point.startswith(new + "/dev/"))
    for top in read_only:
        _read_only(top, devices=top == new + "/dev")


def _bind(source: str, target: str) -> None:
    if os.path.isdir(source):
        os.makedirs(target, 0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    _mount(source, target, None, _MS_BIND | _MS_REC)


def hold_imports() -> None:
    """Before a uid drop without a private view: the interpreter may live where the new uid cannot
    go (a 0700 /root). Its import directories, opened now, stay importable as /proc/self/fd/N."""
    for index, entry in enumerate(sys.path):
        if entry and os.path.isdir(entry):
            fd = os.open(entry, os.O_RDONLY | os.O_DIRECTORY)
            os.dup2(fd, HELD_FD + index, inheritable=False)
            os.close(fd)
            sys.path[index] = f"/proc/self/fd/{HELD_FD + index}"
    sys.path_importer_cache.clear()


def close_from(low: int) -> None:
    """Close every descriptor from `low` up, but the held import directories."""
    os.closerange(low, HELD_FD)
    os.closerange(HELD_FD + 8, 1 << 16)


def hide_other_uids(proc: str) -> None:
    """Remount `proc` so that a process sees only its own uid's processes (hidepid=invisible)."""
    _mount("proc", proc, "proc", _MS_REMOUNT | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "hidepid=2")


def die_with_parent(parent: int) -> None:
    """SIGKILL when the thread that started us ends (what `bwrap --die-with-parent` does), set after
    any uid change (which clears it); gone already if the parent is not `parent` any more."""
    _check(_libc().prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:
        os._exit(1)
