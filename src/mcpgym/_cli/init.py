"""`mcpgym init NAME`: write a new environment package that passes its own tests out of the box.

Layer: CLI; touches only the files it writes. The templates live in `mcpgym/_cli/template/`
(`*.tmpl`, with `{{dist}}`, `{{package}}`, `{{cls}}`, `{{registry_name}}` and
`{{mcpgym_version}}` filled in); `src/package/` becomes `src/<package>/`.
"""

from __future__ import annotations

import argparse
import keyword
import re
import sys
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

NAME = "init"
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*$")
_RESERVED = {"mcpgym", "test", "tests", "servers", "harness", "src"}
_RENAMED = {"dockerignore": ".dockerignore", "gitignore": ".gitignore"}


class ScaffoldError(Exception):
    """The name is unusable or a file would be overwritten; nothing was written."""


def names(name: str, namespace: str = "io.github.example") -> dict[str, str]:
    """The names a scaffold uses: distribution, import package, class and MCP registry name."""
    if not _NAME.match(name):
        raise ScaffoldError(f"{name!r} is not a usable name: letters and digits, words joined by '-' or '_'")
    package = name.lower().replace("-", "_")
    if keyword.iskeyword(package) or package in _RESERVED or package in sys.stdlib_module_names:
        raise ScaffoldError(f"{name!r} would shadow the module {package!r}: pick another name")
    cls = "".join(part[:1].upper() + part[1:] for part in re.split(r"[-_]", name))
    from mcpgym import __version__

    return {
        "dist": name.lower().replace("_", "-"),
        "package": package,
        "cls": cls,
        "registry_name": f"{namespace}/{name.lower().replace('_', '-')}",
        "mcpgym_version": __version__,
    }


def scaffold(name: str, directory: Path | None = None, *, namespace: str = "io.github.example") -> list[Path]:
    """Write the package for environment `name` into `directory` (default `./NAME`); return the files.

    Refuses, writing nothing, if any of the files already exists.
    """
    values = names(name, namespace)
    root = Path(directory) if directory is not None else Path(name)
    files = {_destination(root, relative, values): text for relative, text in _templates(values)}
    existing = sorted(str(path) for path in files if path.exists() or path.is_symlink())
    if existing:
        raise ScaffoldError("refusing to overwrite " + ", ".join(existing))
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as f:  # "x": a file that appeared meanwhile is not replaced
            f.write(text)
    return sorted(files)


def _templates(values: dict[str, str]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []

    def walk(node: Traversable, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(".tmpl"):
                text = child.read_text(encoding="utf-8")
                for key, value in values.items():
                    text = text.replace("{{" + key + "}}", value)
                found.append((prefix + child.name.removesuffix(".tmpl"), text))

    walk(resources.files("mcpgym._cli") / "template", "")
    return found


def _destination(root: Path, relative: str, values: dict[str, str]) -> Path:
    parts = relative.split("/")
    if parts[:2] == ["src", "package"]:
        parts[1] = values["package"]
    parts[-1] = _RENAMED.get(parts[-1], parts[-1])
    return root.joinpath(*parts)


def next_steps(root: Path, values: dict[str, str]) -> str:
    """What to type next, printed by `mcpgym init`."""
    return f"""\
created {root}/ ({values["cls"]} in src/{values["package"]}/). Next:
  cd {root}
  pip install -e '.[test]' && pytest
  mcpgym serve {values["package"]}:{values["cls"]}    # stdio; add --http --port 8000 for HTTP
  mcpgym harness config claude-code {values["package"]}    # Claude Code's entry; --write merges it into .mcp.json"""


def register(sub: Any) -> None:
    init = sub.add_parser(
        "init", help="create a new environment package: module, tests, README, Dockerfile, server.json"
    )
    init.add_argument("name", metavar="NAME", help="e.g. my-env: package my_env, class MyEnv, directory ./my-env")
    init.add_argument(
        "--dir", default=None, help="where to write it (default: ./NAME); existing files are never replaced"
    )
    init.add_argument("--namespace", default="io.github.example", help="MCP registry namespace (%(default)s)")


def dispatch(args: argparse.Namespace) -> None:
    root = Path(args.dir if args.dir is not None else args.name)
    try:
        scaffold(args.name, root, namespace=args.namespace)
    except ScaffoldError as exc:
        sys.exit(f"mcpgym init: {exc}")
    print(next_steps(root, names(args.name, args.namespace)))
