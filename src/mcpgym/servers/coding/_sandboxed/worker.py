"""The program that runs inside the sandbox: a Python REPL driven over a pipe.

Layer: sandbox side. Stdlib only, never imported by the server: its source is handed to a
fresh interpreter (`python -I -c SOURCE CONFIG`), so nothing of the server's memory or
modules is in reach of user code. Started as `main(config)`; the config is a Python literal
(`repr`, read with `_literal`): `{"limits": {...}, "uid": int | None, "cwd": str}`.

Protocol. Requests arrive on the original stdin (moved to a private descriptor, so user code
reading stdin gets EOF), each a line `<token> <size>\\n` and then `size` bytes of code (UTF-8,
surrogates passed through). When the request is done the worker writes
`\\0<token> <status>\\n` to stdout, where user output (stdout and stderr merged) also goes.
Status is `ok` or `raised <ExceptionName>`. Submissions are graded elsewhere, by `_zygote.py`.

Start-up is the first call's time, so the worker imports only C modules: not `json`, `signal`
or `ast` (with the `re`, `enum` and `typing`... they import, ~9 ms of a ~20 ms start), but
`_signal` and `_ast`, which those wrap.
"""

import _ast
import builtins
import os
import resource
import sys

TYPE_CHECKING = False  # not `typing` at run time: the worker starts ~2 ms faster without it
if TYPE_CHECKING:
    import signal as _signal  # the same functions and constants, typed
    from typing import Any

    from mcpgym.servers.coding._sandboxed.confine import (
        block_user_namespaces,
        die_with_parent,
        hold_imports,
        private_root,
    )
else:
    import _signal

_MAIN_PID = os.getpid()


def _limit(kind: int, value: int) -> None:
    resource.setrlimit(kind, (value, value))


def _confine(config: "dict[str, Any]") -> None:
    limits = config["limits"]
    _limit(resource.RLIMIT_AS, limits["memory_bytes"])
    _limit(resource.RLIMIT_FSIZE, limits["file_size_bytes"])
    _limit(resource.RLIMIT_NPROC, limits["max_processes"])
    _limit(resource.RLIMIT_CORE, 0)
    # Hard CPU cap over the interpreter's life; the soft cap is re-armed per call (see _arm_cpu).
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_seconds"], limits["cpu_lifetime_seconds"]))
    # Oversized writes then fail with OSError(EFBIG) in user code instead of killing the REPL.
    _signal.signal(_signal.SIGXFSZ, _signal.SIG_IGN)
    if not config.get("seccomp_applied"):  # bwrap installs it when it launches us
        block_user_namespaces()  # before the uid drop: ctypes may be out of the new uid's reach
    uid = config.get("uid")
    if uid is not None:
        if config.get("hold_imports"):
            hold_imports()  # no private view: the interpreter may be under a 0700 home
        # Root server: each sandbox gets a uid of its own, so the process-count limit is
        # counted per sandbox and no sandbox can signal another's processes.
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    if "parent" in config:  # no launcher to die with the server (`none`)
        die_with_parent(config["parent"])
    os.chdir(config["cwd"])
    sys.path.insert(0, "")  # like an interactive prompt: modules in the workspace import (-I drops it)


def _arm_cpu(seconds: int) -> None:
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = int(used.ru_utime + used.ru_stime) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (min(spent + seconds, hard), hard))


def _run_repl(code: str, namespace: "dict[str, Any]") -> str:
    """Run like an interactive prompt: the value of a final expression is printed."""
    try:
        tree = compile(code, "<input>", "exec", _ast.PyCF_ONLY_AST)  # what ast.parse does
        assert isinstance(tree, _ast.Module)
        last = tree.body[-1] if tree.body else None
        if isinstance(last, _ast.Expr):
            tree.body.pop()
            exec(compile(tree, "<input>", "exec"), namespace)
            value = eval(compile(_ast.Expression(last.value), "<input>", "eval"), namespace)
            if value is not None:
                namespace["_"] = value
                print(repr(value))
        else:
            exec(compile(tree, "<input>", "exec"), namespace)
    except BaseException as exc:  # the REPL reports every failure, SystemExit included
        _print_user_traceback(exc)
        return f"raised {type(exc).__name__}"
    return "ok"


def _print_user_traceback(exc: BaseException) -> None:
    import traceback  # imported on first use: it costs startup time

    # Drop this module's frames: the agent only needs to see its own code.
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "<input>":
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb if tb is not None else exc.__traceback__)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            continue  # user code closed or broke the stream; the marker goes to fd 1 regardless


def _leave_init() -> None:
    """Under `unshare --fork` the worker is its pid namespace's init, which the kernel spares
    every signal whose action is the default (SIGXCPU: the CPU limit would never fire). So fork:
    the child is the worker, the parent stays init, reaps orphans and exits as the worker did."""
    global _MAIN_PID
    worker = os.fork()
    if worker == 0:
        _MAIN_PID = os.getpid()
        # The OOM killer's first choice in an episode out of memory, not the init (whose death
        # would end the namespace with no exit status to say why). Raising needs no capability.
        with open("/proc/self/oom_score_adj", "w") as adj:
            adj.write("1000")
        return
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == worker:
            code = os.waitstatus_to_exitcode(status)
            os._exit(128 - code if code < 0 else code)  # killed by signal N: 128 + N, as bwrap reports


def _reap() -> None:
    """Collect exited children: the server kills what a call left running, and a zombie would
    still count against RLIMIT_NPROC."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def main(config: "dict[str, Any]") -> None:
    if "view" in config:  # under `unshare`: the private filesystem bwrap would have built
        private_root(config["view"])
    if os.getpid() == 1:
        _leave_init()
    requests = os.fdopen(os.dup(0), "rb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(1, 2)
    sys.stderr = sys.stdout
    _confine(config)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    cpu = config["limits"]["cpu_seconds"]
    os.write(1, b"\0ready\n")  # confined: the server starts the first call's clock now
    while header := requests.readline():
        token, size = header.split()
        code = requests.read(int(size)).decode("utf-8", "surrogatepass")
        _reap()  # what the server killed after the last call
        _arm_cpu(cpu)
        status = _run_repl(code, namespace)
        if os.getpid() != _MAIN_PID:
            os._exit(0)  # a process user code forked ran off the end of its code: it is no REPL
        _flush()
        _reap()
        os.write(1, b"\0" + token + b" " + status.encode() + b"\n")


def _literal(text: str) -> "Any":
    """The config, a literal the server wrote with `repr()`: dicts, lists, strings, numbers,
    booleans and None (what `ast.literal_eval` reads, without importing `ast`). `repr()` writes a negative
    number as a minus and a constant (`-1`: RLIM_INFINITY), and infinities and NaN as names."""

    def value(node: "Any") -> "Any":
        if isinstance(node, _ast.Constant):
            return node.value
        if isinstance(node, _ast.Dict):
            return {value(key): value(item) for key, item in zip(node.keys, node.values, strict=True)}
        if isinstance(node, _ast.List):
            return [value(item) for item in node.elts]
        if isinstance(node, _ast.UnaryOp) and isinstance(node.op, _ast.USub):
            number = value(node.operand)
            if type(number) in (int, float):
                return -number
        if isinstance(node, _ast.Name) and node.id in ("inf", "nan"):
            return float(node.id)
        raise ValueError(f"not a literal: {type(node).__name__}")

    tree = compile(text, "<config>", "eval", _ast.PyCF_ONLY_AST)
    assert isinstance(tree, _ast.Expression)
    return value(tree.body)


if __name__ == "__main__":
    main(_literal(sys.argv[1]))
