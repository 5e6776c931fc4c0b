"""What the product's docstrings and comments name exists: a dotted path into the project
(`indexer.pipeline.ReadAhead`, `records.kinds`), a method of one of its classes
(`Committer.prepare`), a file of the project (`bountysite/daphne_ws.py`). A rename or a move that
leaves a stale name behind fails here, so a newcomer who follows a name finds what it names.

Two kinds of dotted names are not code and are left alone: the loggers' names
(`logging.getLogger("records.access")`) and `/health`'s members (`indexer.node_unreachable_since`),
each checked against what the code declares instead."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from indexer.health import IndexerHealth

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bountysite", "records", "indexer", "bounty_client", "contracts")
_PACKAGE = "(?:" + "|".join(PACKAGES) + ")"
DOTTED = re.compile(r"(?<![\w./-])(" + _PACKAGE + r"(?:\.[A-Za-z_]\w*)+)")
METHOD = re.compile(r"(?<![\w.])([A-Z][A-Za-z0-9]+)\.([a-z_][a-z0-9_]*)\b")
FILE = re.compile(r"(?<![\w./-])(" + _PACKAGE + r"/[\w/]+\.(?:py|html|json))\b")


def _modules() -> Iterator[ModuleType]:
    for package in PACKAGES:
        root = importlib.import_module(package)
        yield root
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if not any(part in info.name.split(".") for part in ("migrations", "management", "__main__")):
                yield importlib.import_module(info.name)


def _texts(path: Path) -> Iterator[tuple[int, str]]:
    """The docstrings and comments of a source file, with their line numbers."""
    source = path.read_text()
    for number, line in enumerate(source.splitlines(), start=1):
        if "#" in line:
            yield number, line[line.index("#"):]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                yield (node.body[0].lineno if node.body else 0), docstring


def _resolves(dotted: str) -> bool:
    parts = dotted.rstrip(".").split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def _sources() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
                  if "migrations" not in path.parts and "node_modules" not in path.parts)


def _not_code() -> set[str]:
    """The loggers' names the sources declare, and /health's indexer members."""
    loggers = {name for path in _sources() for name in re.findall(r'getLogger\("([\w.]+)"\)', path.read_text())}
    return loggers | {f"indexer.{member}" for member in IndexerHealth.__annotations__}


def _stale() -> list[str]:
    not_code = _not_code()
    classes: dict[str, list[type]] = {}
    for module in _modules():
        for name, member in inspect.getmembers(module, inspect.isclass):
            if member.__module__.split(".")[0] in PACKAGES:
                classes.setdefault(name, []).append(member)
    stale = []
    for path in _sources():
        where = path.relative_to(ROOT)
        for line, text in _texts(path):
            for dotted in DOTTED.findall(text):
                if dotted not in not_code and not _resolves(dotted):
                    stale.append(f"{where}:{line}: {dotted}")
            for owner, attribute in METHOD.findall(text):
                if owner in classes and not any(hasattr(cls, attribute) for cls in classes[owner]):
                    stale.append(f"{where}:{line}: {owner}.{attribute}")
            for named in FILE.findall(text):
                if not (ROOT / named).exists():
                    stale.append(f"{where}:{line}: {named}")
    return stale


@pytest.mark.django_db
def test_every_name_in_a_docstring_or_comment_exists() -> None:
    assert _stale() == []
