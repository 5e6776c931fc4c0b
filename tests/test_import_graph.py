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
# The webhooks app is a leaf: it reads records and the indexer; of it, the indexer imports nothing
# and records' read side only the health it reports (GET /health), which reads only its models.
WEBHOOKS_READ_BY_RECORDS = frozenset({"webhooks.health", "webhooks.models"})


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


RECORDS, INDEXER, WEBHOOKS = _modules("records"), _modules("indexer"), _modules("webhooks")


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


@pytest.mark.parametrize("module", sorted(INDEXER), ids=str)
def test_the_indexer_imports_nothing_of_the_webhooks(module: str) -> None:
    assert not {name for name in _imports(INDEXER[module]) if _within(name, "webhooks")}


@pytest.mark.parametrize("module", sorted(RECORDS), ids=str)
def test_records_reads_the_webhooks_through_their_health_only(module: str) -> None:
    imported = {_importable(name, WEBHOOKS) for name in _imports(RECORDS[module]) if _within(name, "webhooks")}
    allowed: frozenset[str] = frozenset() if module in RECORDS_DATA else WEBHOOKS_READ_BY_RECORDS
    assert imported <= allowed, f"{module} imports {sorted(imported - allowed)} of the webhooks"


@pytest.mark.parametrize("module", sorted(WEBHOOKS_READ_BY_RECORDS), ids=str)
def test_what_records_reads_of_the_webhooks_imports_only_their_models(module: str) -> None:
    imported = {name for name in _imports(WEBHOOKS[module]) if _within(name, "webhooks")
                or _within(name, "records") or _within(name, "indexer")}
    assert {_importable(name, WEBHOOKS) for name in imported if _within(name, "webhooks")} <= {"webhooks.models"}
    assert {_importable(name, RECORDS) for name in imported if _within(name, "records")} <= RECORDS_DATA


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The checker itself: an import of the websocket from the indexer is seen, however written."""
    source = tmp_path / "example.py"
    source.write_text("def later():\n    from records.ws import feed\n    import records.selectors\n")
    assert {_importable(name, RECORDS) for name in _imports(source)} == {
        "records.ws", "records.ws.feed", "records.selectors"}
