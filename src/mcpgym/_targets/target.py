"""The target grammar: what `connect`, `connect_sync`, every CLI command, the harness, TRL and
the pool accept as "an environment", parsed in this one place (rfcs/0008-target-grammar.md).

Layer: client facade, below `_connect`. Imports only the environment and server types it
recognises; opens nothing (a target is parsed here and opened by `mcpgym.connect`).

The forms, tried in this order:

    object with __mcpgym_connect__        e.g. mcpgym.pool.Pool              -> "connectable"
    Environment class / partial / instance                                   -> "environment"
    GymServer, mcp Server, MCPServer, StdioServerParameters                  -> "server"
    ["argv", ...] (a list or tuple of str)                                   -> "command"
    "http://..." / "https://..."                                             -> "url"
    "SCHEME:REST" for a scheme in SCHEMES, e.g. "gym:FrozenLake-v1"          -> a bridge's form
    "path/to/file.py[:Class]"   a file, by its suffix (FILE_FORMATS)         -> "environment"
    "package.module:Class"                                                   -> "environment"
    "blackjack"                 a registered short name (`names.py`)         -> "environment"
    "package.module"            its one Environment subclass                 -> "environment"
    "python -m mcpgym.servers.echo", "./server", "/usr/bin/srv"  a command line     -> "command"

A new file-based form (e.g. `mcpgym.yaml` run specs) is one entry in `FILE_FORMATS`: suffix ->
loader. A string that fits no form, or two at once (a bare name that is both an importable
module and an executable on PATH), is a `TargetError` that lists the forms.

Nothing here changes `sys.path` for good: module names resolve against `sys.path` as the
caller has it (the `mcpgym` command line puts the working directory first, as `python -m`
does), and a `.py` file's own directory is on the path only while that file is imported, so
its top-level imports of sibling modules work.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import re
import shlex
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from mcp import StdioServerParameters
from mcp.server import Server
from mcp.server.mcpserver import MCPServer

from mcpgym._client.api import AsyncEnv
from mcpgym._core.extras import MissingExtra, install
from mcpgym._episode.environment import Environment
from mcpgym._server.gym_server import GymServer
from mcpgym._targets import names

FORMS = """\
  an Environment class, functools.partial(Class, ...) or instance   (in-process)
  package.module:Class          an Environment class to import   (in-process)
  blackjack                     a registered name: `mcpgym envs` lists them   (in-process)
  package.module                its one Environment subclass (or its __mcpgym_environment__)   (in-process)
  path/to/file.py[:Class]       an Environment class defined in a file   (in-process)
  http(s)://host:port/mcp       a server over streamable HTTP
  gym:ID[?k=v&...]              a Gymnasium environment, textarena:ID a TextArena game   (in-process)
  openenv:URL | openenv:module:Class   an OpenEnv server or environment class (mcpgym.bridges.openenv)
  "python -m mcpgym.servers.echo"      a command to launch, spoken to over stdio (a list of str too)
  path/to/mcpgym.yaml           a run spec naming any of these (and how to serve it)
  a GymServer / mcp Server / MCPServer / StdioServerParameters, or an object with __mcpgym_connect__"""


class TargetError(TypeError):
    """A target that fits none of the forms, or more than one (the message lists the forms), or
    that names an environment which cannot be loaded (the message says why, in one line).

    A `TypeError` because that is what a wrong target always raised (callers catch it)."""

    def __init__(self, message: str, *, forms: bool = True) -> None:
        super().__init__(f"{message}\nA target is one of:\n{FORMS}" if forms else message)


@runtime_checkable
class SupportsConnect(Protocol):
    """Anything that knows how to open an environment client for itself (e.g. `mcpgym.pool.Pool`)."""

    def __mcpgym_connect__(
        self, *, mode: str, read_timeout: float | None, headers: dict[str, str] | None
    ) -> AsyncEnv: ...


Target = (
    SupportsConnect
    | type[Environment]
    | Environment
    | functools.partial[Any]
    | GymServer
    | Server[Any]
    | MCPServer
    | StdioServerParameters
    | str
    | Sequence[str]
)

Form = Literal["connectable", "environment", "server", "url", "command"]


@dataclass(frozen=True)
class ParsedTarget:
    """A target, recognised: `value` is what to open, `form` says which door opens it.

    `value` is, by form: the object itself ("connectable"); an Environment class, partial or
    instance ("environment"); an `mcp.server.Server` or `StdioServerParameters` ("server";
    a GymServer is given as its `.mcp`); the URL ("url"); the `StdioServerParameters`
    ("command"). For an environment named by text, `spec` is text another process can load
    (`module:Class`, or an absolute `file.py:Class`) and `module` the import name, if any.
    """

    form: Form
    value: Any
    spec: str | None = None
    module: str | None = None
    argv: tuple[str, ...] = ()
    """The command line, for a "command" (its first word already this interpreter for `python`)."""


FileLoader = Callable[[Path, str | None], ParsedTarget]

_IDENTIFIER_PATH = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_MODULE = re.compile(rf"^{_IDENTIFIER_PATH}$")
_MODULE_CLASS = re.compile(rf"^({_IDENTIFIER_PATH}):({_IDENTIFIER_PATH})$")
_FILE_CLASS = re.compile(rf"^(.+?)(?::({_IDENTIFIER_PATH}))?$")


def parse(target: Target) -> ParsedTarget:
    """Recognise `target` (see the module docstring); raises `TargetError` when it fits no form."""
    if isinstance(target, SupportsConnect) and not inspect.isclass(target):
        return ParsedTarget("connectable", target)
    if _is_environment(target):
        return ParsedTarget("environment", target)
    if isinstance(target, GymServer):
        return ParsedTarget("server", target.mcp)
    if isinstance(target, StdioServerParameters | Server | MCPServer):
        return ParsedTarget("server", target)
    if isinstance(target, str):
        return parse_text(target)
    if isinstance(target, list | tuple) and all(isinstance(p, str) for p in target):
        return _command(list(target))
    raise TargetError(f"Cannot connect to {target!r}: it fits none of the forms.")


def parse_text(text: str) -> ParsedTarget:
    """Recognise a target written as text (a CLI argument, a config value)."""
    stripped = text.strip()
    if not stripped:
        raise TargetError("The target is empty.")
    if stripped.startswith(("http://", "https://")):
        return ParsedTarget("url", stripped)
    bridged = scheme_target(stripped)
    if bridged is not None:
        return bridged
    file_form = _file_form(stripped)
    if file_form is not None:
        return file_form
    if any(c.isspace() for c in stripped):
        return _command(shlex.split(stripped))
    match = _MODULE_CLASS.match(stripped)
    if match:
        return _environment_text(stripped, match.group(1), match.group(2))
    short = _short_name(stripped)
    if short is not None:
        return short
    if _MODULE.match(stripped):
        return _module_or_command(stripped)
    if "/" in stripped or shutil.which(stripped):
        return _command([stripped])
    raise TargetError(f"{text!r} is not a target.")


SCHEMES: dict[str, str] = {
    "gym": "mcpgym.bridges.gymnasium:target",
    "textarena": "mcpgym.bridges.textarena:target",
    "openenv": "mcpgym.bridges.openenv:target",
}
"""`SCHEME:REST` targets a bridge serves (rfcs/0017-bridges.md): scheme -> "module:function",
imported only when such a target is named (a bridge's framework is an optional extra), and
called as `function(rest, args) -> ParsedTarget` with `args` a run spec's `args` ({} otherwise)."""

_SCHEME = re.compile(r"^([a-z][a-z0-9_-]*):(.*)$", re.DOTALL)


def scheme_target(text: str, args: dict[str, Any] | None = None) -> ParsedTarget | None:
    """The bridge target `text` names (`gym:FrozenLake-v1`), or None when its prefix is no scheme."""
    match = _SCHEME.match(text)
    if match is None or match.group(1) not in SCHEMES:
        return None
    module_name, _, function = SCHEMES[match.group(1)].partition(":")
    resolve = getattr(importlib.import_module(module_name), function)
    return resolve(match.group(2), dict(args or {}))  # type: ignore[no-any-return]


def environment(target: Target) -> type[Environment] | functools.partial[Any] | Environment:
    """The Environment behind `target` (`module:Class`, `module`, `file.py[:Class]`, a class,
    a partial, an instance); `TargetError` for the forms that are not one (URL, command, ...)."""
    parsed = parse(target)
    if parsed.form != "environment":
        raise TargetError(f"{target!r} is a {parsed.form}, not an Environment class.")
    return parsed.value  # type: ignore[no-any-return]


def load_environment(path: str) -> type[Environment]:
    """Import an Environment class named by text: `package.module:Class`, `package.module`
    (its one Environment subclass) or `path/to/file.py[:Class]`."""
    value = environment(path)
    if not inspect.isclass(value):
        raise TargetError(f"{path} is {value!r}, not an mcpgym.Environment subclass.", forms=False)
    return value


def command(argv: str | Sequence[str]) -> StdioServerParameters:
    """Stdio launch parameters for a command line; a leading `python` runs this interpreter."""
    parts = shlex.split(argv) if isinstance(argv, str) else list(argv)
    return _command(parts).value  # type: ignore[no-any-return]


def _is_environment(target: object) -> bool:
    cls = target.func if isinstance(target, functools.partial) else target
    return isinstance(cls, Environment) or (inspect.isclass(cls) and issubclass(cls, Environment))


def _command(argv: list[str]) -> ParsedTarget:
    if not argv:
        raise TargetError("The command is empty.")
    if argv[0] in ("python", "python3"):
        argv = [sys.executable, *argv[1:]]  # this interpreter, with this environment's packages
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    return ParsedTarget("command", params, argv=tuple(argv))


def _environment_text(text: str, module_name: str, attr: str) -> ParsedTarget:
    module = _import(module_name, text)
    obj = _environment_at(module, attr, text, f"{text}: module {module_name!r}")
    return ParsedTarget("environment", obj, spec=text, module=module_name)


def _short_name(name: str) -> ParsedTarget | None:
    """A registered short name (`blackjack`, or one an installed package declares: `names.py`)."""
    try:
        found = names.lookup(name)
    except names.AmbiguousName as exc:
        raise TargetError(str(exc)) from None
    if found is None:
        return None
    try:
        parsed = parse_text(found.spec)
    except ImportError as exc:
        named = isinstance(exc, MissingExtra)  # the message already says what to install
        hint = f" Install it with: {install(found.extra)}." if found.extra and not named else ""
        raise TargetError(f"{name} ({found.spec}) cannot be loaded: {exc}.{hint}", forms=False) from exc
    return ParsedTarget(parsed.form, parsed.value, spec=parsed.spec, module=parsed.module)


def _module_or_command(name: str) -> ParsedTarget:
    """A bare name: a module (its one Environment subclass) or an executable, never both."""
    try:
        found = importlib.util.find_spec(name) is not None
    except ImportError:  # a parent package is missing
        found = False
    executable = "." not in name and shutil.which(name) is not None
    if found and executable:
        raise TargetError(
            f"{name!r} is ambiguous: both an importable module and a command on PATH. "
            f"Write {name}:CLASS for the module, or the command's path (e.g. {shutil.which(name)})."
        )
    if executable:
        return _command([name])
    if not found:
        raise TargetError(f"{name!r} is neither an importable module nor a command on PATH.{_cwd_hint(name)}")
    cls = _one_environment(_import(name, name), name)
    return ParsedTarget("environment", cls, spec=f"{name}:{cls.__qualname__}", module=name)


DEFAULT_ATTRIBUTE = "__mcpgym_environment__"
"""A module with several Environment subclasses names the one its bare module name means."""


def _one_environment(module: Any, name: str) -> type[Environment]:
    default = getattr(module, DEFAULT_ATTRIBUTE, None)
    if inspect.isclass(default) and issubclass(default, Environment):
        return default
    found = {
        obj
        for obj in vars(module).values()
        if inspect.isclass(obj) and issubclass(obj, Environment) and obj is not Environment
    }
    if len(found) != 1:
        names = ", ".join(sorted(c.__qualname__ for c in found)) or "none"
        raise TargetError(
            f"{name} has {len(found)} Environment subclasses ({names}): name one as {name}:CLASS "
            f"(or set {DEFAULT_ATTRIBUTE} = CLASS in the module).",
            forms=False,
        )
    (cls,) = found
    return cls


def _import(module_name: str, text: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):  # the target itself, not one of its imports
            raise TargetError(f"{text}: No module named {exc.name!r}.{_cwd_hint(module_name)}", forms=False) from exc
        raise


def _cwd_hint(module_name: str) -> str:
    top = module_name.split(".")[0]
    if top in ("servers", "harness"):  # a checkout's launchers (rfcs/0016-layout.md), not installed
        return f" Installed, it is mcpgym.{module_name}: name that, which works from a checkout too."
    if Path(top).is_dir() or Path(f"{top}.py").is_file():
        return " It is in the working directory, which is not on sys.path: add it, or name the file."
    return ""


# --- file forms: one loader per suffix -------------------------------------------------------


def _file_form(text: str) -> ParsedTarget | None:
    """`path/to/file.SUFFIX[:Class]` for a suffix in `FILE_FORMATS`; None when it is not one."""
    match = _FILE_CLASS.match(text)
    assert match is not None  # `.+?` matches any non-empty text
    path, attr = Path(match.group(1)), match.group(2)
    loader = FILE_FORMATS.get(path.suffix.lower())
    if loader is None or (any(c.isspace() for c in text) and not path.exists()):
        return None  # "python env.py" is a command line, not a file
    if not path.is_file():
        if _MODULE_CLASS.match(text) or _MODULE.match(text):
            return None  # `pkg.py` may be a module named `py` in package `pkg`: the module forms decide
        raise TargetError(f"{text!r} names a {path.suffix} file, but {path} does not exist.", forms=False)
    return loader(path.resolve(), attr)


def _python_file(path: Path, attr: str | None) -> ParsedTarget:
    """A `.py` file, imported as a module of its own (named after it, in `sys.modules` so its
    classes pickle within this process); its directory is importable only while it loads."""
    name = "mcpgym_file_" + re.sub(r"\W", "_", str(path.with_suffix("")).lstrip("/"))
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None  # a .py path always gets a source loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.parent))
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        finally:
            sys.path.remove(str(path.parent))
    if attr is None:
        cls = _one_environment(module, str(path))
        return ParsedTarget("environment", cls, spec=f"{path}:{cls.__qualname__}")
    obj = _environment_at(module, attr, f"{path}:{attr}", str(path))
    return ParsedTarget("environment", obj, spec=f"{path}:{attr}")


def _environment_at(module: Any, attr: str, text: str, owner: str) -> Any:
    """The Environment subclass at dotted `attr` of `module` (`owner` names it in the error)."""
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise TargetError(f"{owner} has no attribute {attr!r}.", forms=False)
        obj = getattr(obj, part)
    if not _is_environment(obj):
        raise TargetError(f"{text} is {obj!r}, not an mcpgym.Environment subclass.", forms=False)
    return obj


FILE_FORMATS: dict[str, FileLoader] = {".py": _python_file}
"""File targets by suffix: `path/to/file.SUFFIX[:NAME]` -> loader(absolute path, NAME or None).
The place for new file forms (a run-spec `.yaml` registers its loader here)."""
