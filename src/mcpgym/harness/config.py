"""Harness configs: the block that makes an MCP client launch (stdio) or reach (HTTP) a server.

Layer: file formats and paths, no I/O beyond reading and writing one config file. Formats:

    claude-code     project `.mcp.json`:
                    {"mcpServers": {NAME: {"type": "stdio", "command", "args", "env"}}}
                    {"mcpServers": {NAME: {"type": "http", "url"}}}
    claude-desktop  `claude_desktop_config.json` (macOS ~/Library/Application Support/Claude/,
                    Windows %APPDATA%\\Claude\\, Linux ~/.config/Claude/):
                    {"mcpServers": {NAME: {"command", "args", "env"}}}. Its file takes stdio
                    servers only, so a URL is reached through the `mcp-remote` stdio bridge.
    mcp-json        the common `mcpServers` shape most clients read (Cursor, Windsurf, ...):
                    {"command", "args", "env"} or {"url"}

The command is this interpreter's absolute path, so the client runs the server in this
environment whatever its own PATH; `env.PYTHONPATH` names the directory the target's package
is imported from (unless it is installed), so the server starts whatever the client's
working directory (no client documents `cwd`, so it is not relied upon). A module is launched by
the name an installed wheel has too: a checkout's launcher `servers.coding` is written as
`mcpgym.servers.coding`.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import re
import shlex
import shutil
import site
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcpgym._targets.spec import is_spec, load_spec
from mcpgym.harness import target as targets
from mcpgym.harness.errors import ConfigError

CLIENTS = ("claude-code", "claude-desktop", "mcp-json")
_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
Entry = dict[str, Any]


def server_entry(
    client: str, target: str, *, url: str | None = None, record: str | None = None, server_args: Sequence[str] = ()
) -> Entry:
    """The `mcpServers` entry for `target` in `client`'s format."""
    if client not in CLIENTS:
        raise ConfigError(f"unknown client {client!r}: pick one of {', '.join(CLIENTS)}")
    if url is None and target.startswith(("http://", "https://")):
        url = target
    if url is not None:
        if record is not None or server_args:  # they configure a server we would launch, and we do not
            raise ConfigError("--record and --server-args configure a launched server, not a URL: set them on it")
        if client == "claude-code":
            return {"type": "http", "url": url}
        if client == "claude-desktop":
            return {"command": "npx", "args": ["-y", "mcp-remote", url]}
        return {"url": url}
    argv, env = launch(target, record, server_args)
    entry: Entry = {"type": "stdio"} if client == "claude-code" else {}
    entry.update({"command": argv[0], "args": argv[1:], "env": env})
    return entry


def launch(target: str, record: str | None = None, server_args: Sequence[str] = ()) -> tuple[list[str], dict[str, str]]:
    """(argv, env) that serve `target` over stdio from any working directory."""
    module: str | None = None
    parsed = None if is_spec(target) else targets.parse_text(target)
    if parsed is None:  # a run spec: `mcpgym serve` reads it, from any working directory
        environment = load_spec(target).environment
        argv = [sys.executable, "-m", "mcpgym", "serve", str(Path(target).resolve())]
        module = environment.partition(":")[0] if ":" in environment and " " not in environment else None
    elif parsed.form == "environment" and parsed.module == target and _has_main(target):
        module = real_name(target)
        argv = [sys.executable, "-m", module]  # the server's own __main__ (its own flags)
    elif parsed.form == "environment":
        if parsed.spec is None:  # pragma: no cover - text always names a loadable spec
            raise ConfigError(f"cannot launch {target!r} in another process")
        module = real_name(parsed.module) if parsed.module else None
        spec = module + parsed.spec[len(parsed.module or "") :] if module else parsed.spec
        argv = [sys.executable, "-m", "mcpgym", "serve", spec]
    elif parsed.form == "command":
        argv = list(parsed.argv)
        if "-m" in argv[:-1]:
            at = argv.index("-m") + 1
            argv[at] = module = real_name(argv[at])
    else:
        raise ConfigError(f"{target!r} is a {parsed.form}, which a client config cannot launch")
    if record is not None:
        argv += ["--record", str(Path(record).resolve())]
    argv += list(server_args)
    root = _import_root(module) if module else None
    return argv, ({"PYTHONPATH": root} if root else {})


def block(name: str, entry: Entry) -> dict[str, Any]:
    return {"mcpServers": {name: entry}}


def default_name(target: str, url: str | None = None) -> str:
    """`mcpgym.servers.coding` → `coding`; `mcpgym.servers.echo:Echo` → `echo`; `path/env.py` → `env`;
    a URL → `mcpgym`."""
    if target.startswith(("http://", "https://")):
        return "mcpgym"
    parsed = targets.parse_text(target)
    if parsed.module is not None:
        return parsed.module.rsplit(".", 1)[-1].strip("_") or "mcpgym"
    if parsed.form == "environment" and parsed.spec is not None:  # a file
        return Path(parsed.spec.rpartition(":")[0]).stem.strip("_") or "mcpgym"
    words = [w for w in parsed.argv[1:] if _MODULE.match(w) and w not in ("python", "python3", "-m")]
    return words[-1].rsplit(".", 1)[-1] if words and url is None else "mcpgym"


def default_file(client: str) -> Path:
    """Where `client` reads its servers: the project's `.mcp.json`, or Claude Desktop's file."""
    if client == "claude-desktop":
        if sys.platform == "darwin":
            return Path.home() / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
        if sys.platform == "win32":
            base = Path(os.environ.get("APPDATA", Path.home() / "AppData" / "Roaming"))
        else:  # no official Linux build; the path community builds use
            base = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config"))
        return base / "Claude" / "claude_desktop_config.json"
    return Path(".mcp.json")


def merge(path: Path, name: str, entry: Entry, *, force: bool = False) -> Path | None:
    """Set `mcpServers[name]` in the JSON file at `path`, keeping everything else.

    A different entry already under `name` is replaced only with `force`. The old file is
    copied to `<path>.bak` first (returned; an existing `.bak` is kept and the copy gets a
    timestamp), and the new one replaces it atomically (written beside it, then renamed), so a
    crash never leaves half a config. A symlinked config (dotfiles) is written through, and the
    file keeps its mode.
    """
    path = path.resolve()  # replace the file a symlink points to, not the symlink
    config = _read(path)
    servers = config.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: mcpServers is not an object; fix it by hand first")
    if servers.get(name, entry) != entry and not force:
        raise ConfigError(
            f"{path} already has a different mcpServers[{name!r}]: pass --force to replace it, or --name to add another"
        )
    servers[name] = entry
    return _write(path, config)


def gateway_env(gateway: str) -> dict[str, str]:
    """The environment that points Claude Code's model calls at `mcpgym gateway` (its Anthropic
    route, `/v1/messages`); a gateway URL ending in `/episodes/<id>` joins them to that episode."""
    if not gateway.startswith(("http://", "https://")):
        raise ConfigError(f"--gateway must be an http(s) URL, got {gateway!r}")
    return {"ANTHROPIC_BASE_URL": gateway.rstrip("/").removesuffix("/v1")}


def merge_env(path: Path, env: dict[str, str]) -> Path | None:
    """Set `env` in a Claude Code settings file (`.claude/settings.json`), keeping everything
    else; written as `merge` writes (backup, atomic replace)."""
    path = path.resolve()
    config = _read(path)
    current = config.setdefault("env", {})
    if not isinstance(current, dict):
        raise ConfigError(f"{path}: env is not an object; fix it by hand first")
    current.update(env)
    return _write(path, config)


def _write(path: Path, config: dict[str, Any]) -> Path | None:
    """Replace the JSON file at `path` with `config` atomically, the old one kept as a backup (returned)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if path.exists():
        backup = _backup_path(path)
        shutil.copy2(path, backup)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(config, file, indent=2)
            file.write("\n")
        if backup is not None:
            shutil.copymode(backup, tmp)  # mkstemp's 0600 would lock out whoever could read it before
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)  # a failed write leaves the old config untouched and no stray temp file
        raise
    return backup


def _backup_path(path: Path) -> Path:
    """`<path>.bak`, or a timestamped name beside it when that exists (it may be the only good copy)."""
    backup = path.with_name(path.name + ".bak")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    n = 0
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.bak.{stamp}" + (f".{n}" if n > 1 else ""))
    return backup


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        config = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}); fix or move it, then run again") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path} does not hold a JSON object; fix or move it, then run again")
    return config


def real_name(module: str) -> str:
    """`module` under the name an installed mcpgym has too: a checkout's launcher `servers.X` gives `mcpgym.servers.X`.

    The root `servers/` and `harness/` folders of a checkout only launch or forward to the
    `mcpgym` package (rfcs/0016-layout.md), so the entry names the package itself.
    """
    top, dot, rest = module.partition(".")
    if top not in ("servers", "harness") or not dot:
        return module
    try:
        found = importlib.util.find_spec(f"mcpgym.{top}.{rest.partition('.')[0]}")
    except (ImportError, ValueError):
        return module
    return f"mcpgym.{module}" if found is not None else module


def _has_main(module: str) -> bool:
    try:
        return importlib.util.find_spec(f"{module}.__main__") is not None
    except ImportError:  # `module` is not a package, so it has no __main__ submodule
        return False


def _import_root(module: str) -> str | None:
    """The sys.path entry `module` is imported from, unless it is site-packages (always on the path)."""
    top = module.partition(".")[0]
    # Where a fresh process finds `top` on sys.path, as the launched server will look it up.
    spec = importlib.machinery.PathFinder.find_spec(top)
    if spec is None:  # found by another finder (an editable install's, say)
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
    if spec is None or spec.origin is None:
        raise ConfigError(f"cannot find the module {module!r} from {os.getcwd()}: run this where it imports")
    location = Path(spec.origin).resolve().parent
    root = location.parent if spec.submodule_search_locations else location
    installed = {Path(p).resolve() for p in [*site.getsitepackages(), site.getusersitepackages()]}
    return None if root in installed else str(root)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "harness", help="connect an existing agent harness (Claude Code, Claude Desktop, ...) to an environment"
    )
    inner = p.add_subparsers(dest="harness_command", required=True, metavar="SUBCOMMAND")
    c = inner.add_parser(
        "config",
        help="print (or --write) the config block that makes a client launch or reach TARGET",
        description="Print the mcpServers block that makes CLIENT launch TARGET over stdio (or reach it at --url). "
        "--write merges it into the client's config file, keeping every other entry (the old file is kept as .bak).",
        epilog="examples:\n  mcpgym harness config claude-code mcpgym.servers.coding --write\n"
        "  mcpgym harness config claude-desktop mcpgym.servers.coding --record runs/claude\n"
        "  mcpgym harness config mcp-json mcpgym.servers.echo:Echo --url http://127.0.0.1:8000/mcp\n"
        "  mcpgym harness config claude-code mcpgym.servers.coding --server-args='--partial-credit'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("client", choices=CLIENTS)
    c.add_argument(
        "target",
        metavar="TARGET",
        help="mcpgym.servers.coding, mcpgym.servers.echo:Echo, path/to/env.py, a command, or a URL",
    )
    c.add_argument(
        "--server-args",
        default="",
        metavar="'FLAGS'",
        help="extra flags for the server command, one string: --server-args='--partial-credit'",
    )
    c.add_argument("--url", default=None, help="reach a running HTTP server instead of launching one")
    c.add_argument("--name", default=None, help="the server's name in the client (default: from TARGET)")
    c.add_argument("--record", default=None, metavar="DIR", help="the server records every episode under DIR")
    c.add_argument("--write", action="store_true", help="merge into the client's config file instead of printing")
    c.add_argument("--force", action="store_true", help="with --write: replace a different entry of the same name")
    c.add_argument("--file", default=None, help="the config file to write (default: the client's own)")
    c.add_argument(
        "--gateway",
        default=None,
        metavar="URL",
        help="claude-code: send its model calls to `mcpgym gateway` (ANTHROPIC_BASE_URL in .claude/settings.json)",
    )


def run(args: argparse.Namespace) -> int:
    url = args.url
    server_args = shlex.split(args.server_args)
    entry = server_entry(args.client, args.target, url=url, record=args.record, server_args=server_args)
    name = args.name or default_name(args.target, url)
    env = gateway_env(args.gateway) if args.gateway else None
    if env is not None and args.client != "claude-code":
        raise ConfigError(
            f"--gateway writes Claude Code's settings; for {args.client}, point its model at {args.gateway}"
        )
    if not args.write:
        print(json.dumps(block(name, entry), indent=2))
        if env is not None:
            print(f"// .claude/settings.json\n{json.dumps({'env': env}, indent=2)}")
        if args.client == "claude-desktop" and (url or args.target.startswith(("http://", "https://"))):
            print(
                "note: Claude Desktop's config file takes stdio servers only; this entry bridges to the URL "
                "with `npx mcp-remote` (needs Node.js)",
                file=sys.stderr,
            )
        return 0
    path = Path(args.file) if args.file else default_file(args.client)
    backup = merge(path, name, entry, force=args.force)
    print(
        f"wrote mcpServers[{name!r}] to {path}" + (f" (previous file kept as {backup})" if backup else ""),
        file=sys.stderr,
    )
    if env is not None:  # next to the MCP server entry: the project's .claude/settings.json
        settings = path.resolve().parent / ".claude" / "settings.json"
        kept = merge_env(settings, env)
        print(
            f"wrote env.ANTHROPIC_BASE_URL to {settings}" + (f" (previous file kept as {kept})" if kept else ""),
            file=sys.stderr,
        )
    return 0
