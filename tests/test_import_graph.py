"""The dependency rule between `records` and `indexer` (docs/development.md, The flow, and who
imports whom): records' data modules import nothing of the indexer; the indexer imports only
those data modules of records (never the read API, the websocket or the selectors); records'
read side reads the indexer's tables through `indexer.models` and `indexer.health` only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PROJECT_DIR = Path(__file__).resolve().parent.parent
RECORDS_DATA = frozenset({
    "records", "records.apps", "records.models", "records.fields", "records.representation", "records.search",
    "records.changes", "records.bodies", "records.chronology", "records.merged_order", "records.kinds",
    "records.snapshot", "records.dialect", "records.history",
})
INDEXER_READ_BY_RECORDS = frozenset({"indexer.models", "indexer.health"})


def _modules(package: str) -> dict[str, Path]:
    found = {}
    for path in sorted((PROJECT_DIR / package).rglob("*.py")):
        parts = path.relative_to(PROJECT_DIR).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(path: Path) -> set[str]:
    """Every module the file imports, at any depth (inside functions too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)  # `from records import live`
    return names


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _importable(name: str, modules: dict[str, Path]) -> str:
    """The module an imported name is (`from records.models import Bounty` names records.models)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


RECORDS, INDEXER = _modules("records"), _modules("indexer")


def test_the_data_modules_exist() -> None:
    assert not RECORDS_DATA - set(RECORDS), sorted(RECORDS_DATA - set(RECORDS))
    assert not INDEXER_READ_BY_RECORDS - set(INDEXER)


@pytest.mark.parametrize("module", sorted(INDEXER), ids=str)
def test_the_indexer_imports_only_the_data_modules_of_records(module: str) -> None:
    imported = {_importable(name, RECORDS) for name in _imports(INDEXER[module]) if _within(name, "records")}
    assert imported <= RECORDS_DATA, f"{module} imports {sorted(imported - RECORDS_DATA)} of records' read side"


@pytest.mark.parametrize("module", sorted(RECORDS), ids=str)
def test_records_reads_the_indexer_through_its_models_and_health_only(module: str) -> None:
    imported = {_importable(name, INDEXER) for name in _imports(RECORDS[module]) if _within(name, "indexer")}
    allowed: frozenset[str] = frozenset() if module in RECORDS_DATA else INDEXER_READ_BY_RECORDS
    assert imported <= allowed, f"{module} imports {sorted(imported - allowed)} of the indexer"


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The checker itself: an import of the websocket from the indexer is seen, however written."""
    source = tmp_path / "example.py"
    source.write_text("def later():\n    from records.ws import feed\n    import records.selectors\n")
    assert {_importable(name, RECORDS) for name in _imports(source)} == {
        "records.ws", "records.ws.feed", "records.selectors"}
