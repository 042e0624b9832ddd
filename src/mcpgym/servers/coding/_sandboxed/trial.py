"""One graded submission inside the sandbox: the solution and the tests in two processes.

Layer: sandbox side, stdlib only; its source is put in front of `_zygote.py` (which forks a
`trial()` per submission, ahead of need) after `_confine.py`. Never imported by the server at run time.

Threat model (rfcs/0003-coding-sandbox.md): the submission is adversarial, and anything its
process knows or can write is not evidence. So the hidden tests never run in it:

- the **test process** (this one; pid 1 of the submission's own pid namespace when the grader
  may create one) reads the task's prompt and tests, defines `check` and calls it with a
  *proxy* for the candidate function. It runs no submitted code, cannot be ptraced or read
  through /proc (not dumpable), and, as the namespace's init, ignores every signal the
  submission can send. Only it holds the verdict pipe.
- the **solution process** (forked before the tests are read, so they are not in its memory)
  runs the submitted code and answers calls over a socket: arguments in, a return value (or a
  builtin exception name) out, as plain data (`encode`/`decode`: None, bool, int, float,
  complex, str, bytes, list, tuple, set, frozenset, dict, by exact type). The test process
  rebuilds each value from builtin types, so a returned object cannot bring its own `__eq__`,
  and a patched builtin, a fake `check`, an `os._exit(0)` or a verdict printed anywhere stays
  in the solution's process, where it decides nothing.

Per submission, when the grader may: a pid namespace (its init's exit kills every process in
it, so nothing outlives the answer and no reaper is needed) and an IPC namespace (SysV and POSIX
message queues die with it); the server mounts a private tmpfs as the solution's only writable
directory.
"""

import ast
import builtins
import contextlib
import json
import os
import random
import resource
import signal
import socket
import struct
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpgym.servers.coding._sandboxed.confine import CLONE_NEWIPC, CLONE_NEWNET, close_from, set_dumpable, unshare

VERDICT_FD = 3
REQUEST_FD = 4  # the zygote's one request to a trial (see `trial`)
OBSERVED_FD = 4  # in the solution's process: the write end of its observations pipe (see `Observer`)
_MESSAGE_MAX = 16 << 20
_HEADER = struct.Struct("!I")
_CONTAINERS: dict[type, str] = {list: "l", tuple: "t", set: "s", frozenset: "f"}
_BUILDERS: dict[str, Callable[[Any], Any]] = {"l": list, "t": tuple, "s": set, "f": frozenset}


class SolutionGone(BaseException):
    """The solution's process ended (or broke the channel) while the tests ran. A BaseException:
    a test's `except Exception` must not count it as a handled failure."""


def encode(value: Any) -> Any:
    """Plain data as JSON, containers tagged; anything else is refused (TypeError)."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind in _CONTAINERS:
        return {_CONTAINERS[kind]: [encode(item) for item in value]}
    if kind is dict:
        return {"d": [[encode(k), encode(v)] for k, v in value.items()]}
    if kind is bytes:
        return {"b": value.hex()}
    if kind is complex:
        return {"c": [value.real, value.imag]}
    raise TypeError(f"{kind.__name__} is not plain data")


def decode(data: Any) -> Any:
    """The value `encode` made, built from builtin types only (whatever the sender was)."""
    kind = type(data)
    if data is None or kind in (bool, int, float, str):
        return data
    if kind is not dict or len(data) != 1:
        raise TypeError("malformed value")
    ((tag, body),) = data.items()
    if tag == "b" and type(body) is str:
        return bytes.fromhex(body)
    if type(body) is not list:
        raise TypeError("malformed value")
    if tag in _BUILDERS:
        return _BUILDERS[tag](decode(item) for item in body)
    if tag == "d" and all(type(pair) is list and len(pair) == 2 for pair in body):
        return {decode(pair[0]): decode(pair[1]) for pair in body}
    if tag == "c" and len(body) == 2 and all(type(part) in (int, float) for part in body):
        return complex(body[0], body[1])
    raise TypeError("malformed value")


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    data = json.dumps(message).encode()
    sock.sendall(_HEADER.pack(len(data)) + data)


def receive(sock: socket.socket) -> dict[str, Any]:
    (size,) = _HEADER.unpack(_read_exactly(sock, _HEADER.size))
    if size > _MESSAGE_MAX:
        raise SolutionGone
    message = json.loads(_read_exactly(sock, size))
    if type(message) is not dict:
        raise SolutionGone
    return message


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        data = sock.recv(min(size - len(chunks), 1 << 20))
        if not data:
            raise SolutionGone
        chunks += data
    return bytes(chunks)


def builtin_name(exc: BaseException) -> str:
    """Only builtin exception names leave a process: a class name could carry test text out."""
    name = type(exc).__name__
    return name if getattr(builtins, name, None) is type(exc) else "Exception"


def _raise_named(name: str) -> None:
    named = getattr(builtins, name, None) if type(name) is str else None
    if isinstance(named, type) and issubclass(named, BaseException):
        raise named.__new__(named)  # without __init__: some (UnicodeDecodeError) need arguments
    raise Exception


# ---- the solution's process ------------------------------------------------------------------

_SYS_HOOKS = ("exit", "excepthook", "displayhook", "settrace", "setprofile", "_getframe", "modules", "stdout")
_HEAP_EVENTS = {"sys._current_frames", "gc.get_objects", "gc.get_referrers", "gc.get_referents"}


class Observer:
    """What the solution's process does that no honest solution needs, seen as it happens (an audit
    hook, and what changed in `builtins` and `sys` after loading and after each call), and written
    then to a pipe only the test process reads: what user code does later (hide its tracks, fake
    more) cannot unsay it, and a name the test process does not know is dropped. Never read from
    the source: an ordinary helper named `check`, a class with `__lt__`, `import inspect` or a
    string that starts with "passed" is not an observation; these are what the code *did*."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._said: set[str] = set()
        self._builtins = dict(vars(builtins))
        self._sys = {name: getattr(sys, name, None) for name in _SYS_HOOKS}
        self._modules = dict(sys.modules)
        self._harness = globals()  # frames of this program are the harness's: the tests' callers
        # Imports through held directories (`_confine.hold_imports`) open /proc/self/fd/N/...
        self._imports = tuple(entry + "/" for entry in sys.path if entry.startswith("/proc/"))

    def say(self, name: str) -> None:
        if name not in self._said:
            self._said.add(name)
            with contextlib.suppress(OSError):
                os.write(self._fd, name.encode() + b"\n")

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "sys._getframe":
            if args and getattr(args[0], "f_globals", None) is self._harness:
                self.say("frame_inspection")  # a frame of the harness (namedtuple's of the solution's are not)
        elif event in _HEAP_EVENTS:
            self.say("frame_inspection")
        elif event.startswith("socket."):
            self.say("opened_socket")
        elif event == "ctypes.call_function" or event == "os.kill" or event == "os.killpg":
            self.say("runner_tampering")
        elif event == "open" and args and isinstance(args[0], str | bytes):
            path = os.fsdecode(args[0])
            if path.startswith("/proc") and not path.startswith(self._imports or ("\0",)):
                self.say("runner_tampering")

    def check(self) -> None:
        """After loading and after each call: builtins and the interpreter's hooks as they were."""
        now = vars(builtins)
        if len(now) != len(self._builtins) or any(now.get(k, self) is not v for k, v in self._builtins.items()):
            self.say("patches_builtins")
        if any(getattr(sys, name, None) is not value for name, value in self._sys.items()):
            self.say("patches_sys_modules")
        for name, module in list(sys.modules.items()):
            before = self._modules.get(name, self)
            if before is self:
                if getattr(module, "__spec__", None) is None:  # not imported: planted
                    self.say("patches_sys_modules")
                self._modules[name] = module
            elif module is not before:
                self.say("patches_sys_modules")


def solution(sock: socket.socket, limits: dict[str, int]) -> None:
    """Wait for the submission, confine, run it, then answer calls until the test process is done.
    Never returns. Until the first message it runs only this code (it is forked ahead of need)."""
    try:
        warm_up()
        submitted = receive(sock)  # from the test process: the code, and whose and where it runs
        _limit(limits)
        drop_to(submitted["uid"])
        work = submitted["work"]
        os.chdir(work)
        os.environ["TMPDIR"] = os.environ["HOME"] = work
        random.seed()
        namespace: dict[str, Any] = {"__name__": "__main__"}
        observer = Observer(OBSERVED_FD)
        sys.addaudithook(observer.audit)
        try:
            exec(compile(submitted["code"], "<solution>", "exec"), namespace)
            function = namespace[submitted["entry_point"]]
        except BaseException as exc:
            observer.check()
            send(sock, {"raise": builtin_name(exc)})
            return
        observer.check()
        send(sock, {"ready": True})
        while True:
            request = receive(sock)
            answer = _answer(function, request)
            observer.check()
            send(sock, answer)
    except BaseException:
        pass  # the channel broke, or user code broke this process: the test process sees EOF
    finally:
        os._exit(0)


def _answer(function: Callable[..., Any], request: dict[str, Any]) -> dict[str, Any]:
    try:
        args, kwargs = decode(request["args"]), decode(request["kwargs"])
        result = function(*args, **kwargs)
    except BaseException as exc:
        return {"raise": builtin_name(exc)}
    try:
        return {"value": encode(result)}
    except TypeError:
        return {"raise": "TypeError", "signal": "non_plain_return"}
    except RecursionError:
        return {"raise": "RecursionError"}


# ---- the test process ------------------------------------------------------------------------


class Candidate:
    """What `check` is handed: calls go to the solution's process; values come back rebuilt."""

    def __init__(self, sock: socket.socket, signals: set[str]) -> None:
        self._sock = sock
        self._signals = signals

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        request = {"args": encode(list(args)), "kwargs": encode(dict(kwargs))}
        try:
            send(self._sock, request)
            reply = receive(self._sock)
        except OSError:  # the solution's process is gone
            raise SolutionGone from None
        except ValueError:  # it sent something that is not JSON: it is no longer answering calls
            self._signals.add("malformed_reply")
            raise SolutionGone from None
        if reply.get("signal") == "non_plain_return":
            self._signals.add("non_plain_return")
        if "raise" in reply:
            _raise_named(reply["raise"])
        if "value" not in reply:
            raise SolutionGone
        try:
            return decode(reply["value"])
        except (TypeError, ValueError, RecursionError):
            self._signals.add("malformed_reply")
            raise TypeError from None


def count_asserts(source: str) -> tuple[ast.Module, int]:
    """The tests with every `assert` of `check`, at any depth, recording its outcome and carrying
    on instead of stopping the run: the solution, answering the calls, learns nothing from being
    called again (all-or-nothing grading that stopped at the first failure told it the last
    answer held). The top-level ones are counted (`__mcpgym_passed__`, partial credit); a nested
    one that fails is recorded (`__mcpgym_failed__`). Assert messages are dropped: one that called
    the candidate would call it only when the assert failed."""
    tree = ast.parse(source, "<tests>")
    total = 0
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            total += sum(isinstance(stmt, ast.Assert) for stmt in node.body)
            node.body = _recorded(node.body, top=True)
    return tree, total


def _recorded(body: list[ast.stmt], *, top: bool) -> list[ast.stmt]:
    """`body` with each assert recording its outcome (statement lists only: an assert is a statement)."""
    done: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.Assert):
            done.append(_recording(stmt, top))
            continue
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                setattr(stmt, name, _recorded(inner, top=False))
        for handler in getattr(stmt, "handlers", ()):
            handler.body = _recorded(handler.body, top=False)
        for case in getattr(stmt, "cases", ()):
            case.body = _recorded(case.body, top=False)
        done.append(stmt)
    return done


def _recording(node: ast.Assert, top: bool) -> ast.stmt:
    """`try: assert test` / `except Exception:` count a nested failure / `else:` count a top-level pass."""
    counter = ast.Name("__mcpgym_passed__" if top else "__mcpgym_failed__", ast.Load())
    index, one = ast.Constant(0), ast.Constant(1)
    target = ast.Subscript(counter, index, ast.Store())
    bump = ast.AugAssign(target, ast.Add(), one)
    caught = ast.Name("Exception", ast.Load())
    otherwise: ast.stmt = ast.Pass()
    handler = ast.ExceptHandler(caught, None, [otherwise if top else bump])
    check = ast.Assert(node.test, None)
    recorded = ast.Try([check], [handler], [bump] if top else [], [])
    made: list[ast.AST] = [recorded, check, handler, caught, otherwise, bump, target, counter, index, one]
    for new in made:  # these only: the test's own expression keeps its locations
        ast.copy_location(new, node)
    return recorded


def _prompt_namespace(prompt: str) -> dict[str, Any]:
    """The task's own helpers (HumanEval tests call some, e.g. `poly`), from the trusted prompt."""
    namespace: dict[str, Any] = {"__name__": "__main__", "__mcpgym_passed__": [0], "__mcpgym_failed__": [0]}
    for source in (prompt, prompt + "    pass\n"):  # a prompt may stop at the signature
        try:
            code = compile(source, "<prompt>", "exec")
        except (SyntaxError, ValueError):
            continue
        try:
            exec(code, namespace)
        except Exception:
            pass  # a prompt that does not run as it stands: the tests may not need it
        break
    return namespace


def run_tests(task: dict[str, Any], sock: socket.socket, observed: int | None = None) -> str:
    """Grade: `passed`, `failed <Name>`, `partial k/n` or `exited`, then ` !signal,...` if any
    (ours, and what the solution's `Observer` wrote on the `observed` pipe)."""
    signals: set[str] = set()
    status = _grade(task, sock, signals)
    if observed is not None:
        signals |= _observations(observed)
    signals |= _sockets_left()
    return status + (f" !{','.join(sorted(signals))}" if signals else "")


def _observations(fd: int) -> set[str]:
    os.set_blocking(fd, False)
    data = b""
    with contextlib.suppress(OSError):  # BlockingIOError: nothing (more) written
        while chunk := os.read(fd, 1 << 16):
            data += chunk
            if len(data) > 1 << 16:
                break
    return {name for name in data.decode(errors="replace").split("\n") if name in OBSERVED}


def _sockets_left() -> set[str]:
    """Sockets in the submission's own network namespace beyond the pair to the solution (opened
    natively, with no audit event, and still open): one read, the namespace's own count."""
    try:
        with open("/proc/self/net/sockstat", "rb") as table:
            used = int(table.readline().split()[-1])  # b"sockets: used N"
    except (OSError, ValueError, IndexError):
        return set()
    return {"opened_socket"} if used > 2 else set()


OBSERVED = {"frame_inspection", "opened_socket", "runner_tampering", "patches_builtins", "patches_sys_modules"}


def _grade(task: dict[str, Any], sock: socket.socket, signals: set[str]) -> str:
    try:
        ready = receive(sock)
    except (SolutionGone, OSError, ValueError):
        signals.add("solution_exited")
        return "exited"
    if "raise" in ready:
        return (
            f"failed {ready['raise'] if type(ready['raise']) is str and ready['raise'].isidentifier() else 'Exception'}"
        )
    namespace = _prompt_namespace(task["prompt"])
    try:
        tests, total = count_asserts(task["tests"])  # every assert runs; the verdict is decided at the end
        candidate = Candidate(sock, signals)
        namespace[task["entry_point"]] = candidate  # tests that call it by name get the proxy too
        exec(compile(tests, "<tests>", "exec"), namespace)
        namespace["check"](candidate)
    except SolutionGone:
        signals.add("solution_exited")
        return "exited"
    except BaseException as exc:
        return f"failed {builtin_name(exc)}"
    passed, failed = namespace["__mcpgym_passed__"][0], namespace["__mcpgym_failed__"][0]
    if failed or (passed < total and not task["partial"]):
        return "failed AssertionError"
    if total and task["partial"]:
        return f"partial {passed}/{total}"
    return "passed"


# ---- the submission's init: namespaces, then the two processes -------------------------------


def _limit(limits: dict[str, int]) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["max_processes"],) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_seconds"], limits["cpu_seconds"] + 1))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def drop_to(uid: int | None) -> None:
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def _isolate() -> None:
    """An IPC namespace of its own: SysV objects and POSIX message queues die with the submission;
    and a network namespace of its own: no socket (abstract unix ones included) reaches another
    submission's, so concurrent submissions of one task (a GRPO group) cannot search the expected
    outputs together.
    (Not a mount namespace: tearing one down waits for an RCU grace period in the exit path, which
    doubled a submission's latency; the server mounts the submission's private tmpfs instead.)"""
    unshare(CLONE_NEWIPC | CLONE_NEWNET)


_SAMPLE = "def f(xs, y=1.0):\n    assert [x for x in xs if x] == xs, 'x'\n    return {'a': (1, 2.0, 'b', None, True)}\n"


def warm_up() -> None:
    """Use, while spare, what a submission will use (compile, exec, the wire format, the assert
    rewriter): a forked process copies each page the first time it writes to it, and reference
    counts are writes, so the first use of anything costs a page copy. Measured: 0.7-0.9 ms of
    a submission's 4.5 ms moves here, out of its way."""
    namespace: dict[str, Any] = {}
    exec(compile(_SAMPLE, "<warm-up>", "exec"), namespace)
    value = namespace["f"]([1, 2])
    decode(json.loads(json.dumps(encode(value))))
    count_asserts(_SAMPLE)


def _await_request() -> dict[str, Any]:
    """The zygote's one request (`{"uid", "dir"}`), read whole from the request pipe; exits on EOF
    (the zygote is gone, or stopped while this trial was still spare)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(REQUEST_FD, 4096)
        if not chunk:
            os._exit(0)
        data += chunk
    os.close(REQUEST_FD)
    request: dict[str, Any] = json.loads(data)
    return request


def trial(limits: dict[str, int], isolated: bool) -> None:
    """The forked child of the zygote for one submission (on the verdict and request fds). Never returns.

    Forked ahead of need: everything before `_await_request` (namespaces, the solution's process)
    depends on no submission, so the zygote keeps one such trial spare and a submission starts
    on it without paying for two forks."""
    pid = os.getpid()
    try:
        if isolated:
            _isolate()
        set_dumpable(False)  # before any file is opened: same-uid code cannot reach them via /proc
        # The solution's process is forked before anything of the task is known, so no test is
        # in its memory; it waits for its code on the socket.
        ours, theirs = socket.socketpair()
        observed, observer = os.pipe()
        child = os.fork()
        if child == 0:
            ours.close()
            os.close(observed)
            os.dup2(theirs.fileno(), VERDICT_FD)  # the verdict pipe's number: it is closed
            theirs.close()
            os.dup2(observer, OBSERVED_FD)  # the request pipe's number: it is closed
            os.set_blocking(OBSERVED_FD, False)  # a full pipe drops observations, never blocks
            sock = socket.socket(fileno=VERDICT_FD)
            close_from(OBSERVED_FD + 1)  # the request pipe among them
            solution(sock, limits)
        theirs.close()
        os.close(observer)
        warm_up()
        request = _await_request()
        uid = request["uid"]
        directory = request["dir"]
        os.chdir(directory)
        with open("tests.json", "rb") as tests_file:
            os.unlink("tests.json")
            with open("solution.json", "rb") as solution_file:
                os.unlink("solution.json")
                submitted = json.load(solution_file)
            _limit(limits)
            drop_to(uid)
            # A uid change sets dumpable to fs.suid_dumpable, which a host may have at 1 (ptrace
            # and /proc/1/fd open to the same uid): so before any submitted code runs, not after.
            set_dumpable(False)
            send(ours, {**submitted, "uid": uid, "work": f"{directory}/work"})
            task = json.load(tests_file)  # while the solution starts
        status = run_tests(task, ours, observed)
        if os.getpid() == pid:
            # Its exit (the kernel freeing its memory) then overlaps ours, instead of following it.
            with contextlib.suppress(OSError):
                os.kill(child, signal.SIGKILL)
            os.write(VERDICT_FD, status.encode() + b"\n")
    finally:
        os._exit(0)
