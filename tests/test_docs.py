"""The docs site (mkdocs.yml, docs/) shows every design record; scripts/test.sh builds it with --strict."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def _nav_files(nav: object) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return set().union(*(_nav_files(item) for item in nav))
    if isinstance(nav, dict):
        return set().union(*(_nav_files(value) for value in nav.values()))
    return set()


def test_every_rfc_has_a_page_in_the_nav_and_a_row_in_the_index() -> None:
    nav = _nav_files(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])
    index = (REPO / "docs" / "rfcs" / "index.md").read_text()
    rfcs = sorted((REPO / "rfcs").glob("[0-9][0-9][0-9][0-9]-*.md"))
    assert len(rfcs) >= 6
    for rfc in rfcs:
        page = REPO / "docs" / "rfcs" / rfc.name
        hint = f'add docs/rfcs/{rfc.name} containing: --8<-- "rfcs/{rfc.name}"'
        assert page.is_file() and f'--8<-- "rfcs/{rfc.name}"' in page.read_text(), hint
        assert f"rfcs/{rfc.name}" in nav, f"add rfcs/{rfc.name} to the nav in mkdocs.yml"
        assert f"]({rfc.name})" in index, f"add a row for {rfc.name} to docs/rfcs/index.md"


def test_every_page_is_in_the_nav() -> None:
    nav = _nav_files(yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"])
    pages = {str(p.relative_to(REPO / "docs")) for p in (REPO / "docs").rglob("*.md")}
    assert pages - nav == set() and nav - pages == set()


def test_install_commands_work_from_a_checkout_whatever_its_folder_is_called() -> None:
    """`pip install ./mcpgym` only works from the parent of a folder named `mcpgym` (#22 item 10):
    the docs install this checkout from its root (`pip install .`)."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    offenders = [str(p.relative_to(REPO)) for p in pages if "pip install ./mcpgym" in p.read_text()]
    assert offenders == []


def test_the_api_reference_covers_every_public_name_and_the_environment_contract() -> None:
    import mcpgym

    page = (REPO / "docs" / "api" / "mcpgym.md").read_text()
    shown = {line.removeprefix("::: mcpgym.").strip() for line in page.splitlines() if line.startswith("::: mcpgym.")}
    shown |= {line.removeprefix("### mcpgym.").strip() for line in page.splitlines() if line.startswith("### mcpgym.")}
    shown |= {name for name in mcpgym.__all__ if f"| `mcpgym.{name}` |" in page}  # the constants' table
    assert set(mcpgym.__all__) - shown == set(), "add these names to docs/api/mcpgym.md"
    assert shown - set(mcpgym.__all__) == {"_episode.environment"}  # the contract the class docstring points to
    assert "The Environment contract" in (mcpgym.Environment.__doc__ or "")


def test_the_tutorial_scaffolds_a_name_no_shipped_environment_has_and_shows_its_class() -> None:
    import re

    from mcpgym._cli.init import names
    from mcpgym._targets.names import lookup

    tutorial = (REPO / "docs" / "tutorials" / "write-an-environment.md").read_text()
    (name,) = re.findall(r"mcpgym init (\S+)", tutorial)
    scaffold = names(name)
    assert lookup(scaffold["package"]) is None and lookup(name) is None  # not `maze`, which ships
    assert f"class {scaffold['cls']}(mcpgym.Environment):" in tutorial
    bullets = [line for line in tutorial.splitlines() if line.startswith("- ")]
    assert len(bullets) == len(set(bullets)) and "In full:" not in tutorial  # one list of the rules
