"""The TypeScript client as its users get it: `npm pack`'s tarball, installed into a fresh project.

The tarball must hold the built ES modules and declarations of every export, the README and
package.json, and nothing of the sources. Installed from it, the package must type-check under
`tsc --strict` with NodeNext and with Bundler resolution, run in Node, and build with Vite.

The package is built and packed from a copy of clients/typescript (its node_modules linked), so
that the test neither races another build of the work tree's dist/ nor packs a stale file of it.
The scratch project is tests/client/pack_project/ plus a package.json that depends on the tarball
and a lockfile whose viem tree is clients/typescript/package-lock.json's: `npm ci --offline`
installs it from the npm cache that scripts/setup's `npm ci` filled, integrity-checked and without
the network. TypeScript and Vite are clients/typescript's own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bounty_client import TransactionBuilder
from tests.client.conftest import CHAIN_ID, CONTRACT, USDC

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"
TEMPLATE = Path(__file__).resolve().parent / "pack_project"
TSC = CLIENT / "node_modules" / "typescript" / "bin" / "tsc"
VITE = CLIENT / "node_modules" / "vite" / "bin" / "vite.js"
AMOUNT = 25_625_000  # the approval that pack_project/web/main.ts shows, for CHAIN_ID, CONTRACT and USDC
NOT_PACKED = {"node_modules", "dist", "build"}
NPM_ENV = {"npm_config_audit": "false", "npm_config_fund": "false", "npm_config_update_notifier": "false",
           "npm_config_loglevel": "error"}
BARE_IMPORT = re.compile(r"""(?:\bfrom|\bimport)\s*\(?\s*["']([^"'./][^"']*)["']""")


@dataclass(frozen=True)
class Packed:
    tarball: Path
    files: frozenset[str]  # paths inside the package, without the tarball's `package/`
    manifest: dict[str, Any]  # the packed package.json

    def read(self, path: str) -> str:
        return packed_text(self.tarball, path)


def packed_text(tarball: Path, path: str) -> str:
    """The text of the package's file `path` in `tarball`."""
    with tarfile.open(tarball) as tar:
        member = tar.extractfile(f"package/{path}")
        assert member is not None, f"{path} is not a file in {tarball.name}"
        return member.read().decode()


def run(args: Sequence[str | Path], cwd: Path, what: str) -> str:
    """The stdout of `args`; a failure shows `what` was being done and everything the command said."""
    result = subprocess.run([str(arg) for arg in args], cwd=cwd, env={**os.environ, **NPM_ENV},
                            capture_output=True, text=True, timeout=180)
    command = " ".join(str(arg) for arg in args)
    assert result.returncode == 0, (
        f"{what} failed ({command} in {cwd}):\n{result.stdout[-10_000:]}\n{result.stderr[-10_000:]}"
    )
    return result.stdout


def subpath_specifier(subpath: str) -> str:
    """The import specifier of an export of package.json (`.` → `bounty-client`)."""
    return "bounty-client" + subpath[1:]


def not_packed(folder: str, names: list[str]) -> set[str]:
    """`shutil.copytree`'s ignore: clients/typescript's installed and built trees."""
    return NOT_PACKED & set(names) if Path(folder) == CLIENT else set()


def code_exports(manifest: dict[str, Any]) -> list[str]:
    """The subpaths of package.json's exports that are modules."""
    return [subpath for subpath in manifest["exports"] if subpath != "./package.json"]


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Packed:
    source = tmp_path_factory.mktemp("bounty-client") / "package"
    shutil.copytree(CLIENT, source, ignore=not_packed)
    (source / "node_modules").symlink_to(CLIENT / "node_modules", target_is_directory=True)
    run(["npm", "run", "build"], source, "building the client (if src/ is mid-edit, retry)")
    destination = tmp_path_factory.mktemp("tarball")
    run(["npm", "pack", "--pack-destination", destination], source, "npm pack")
    tarballs = list(destination.glob("*.tgz"))
    assert len(tarballs) == 1, f"npm pack made {tarballs}"
    with tarfile.open(tarballs[0]) as tar:
        files = frozenset(member.name.removeprefix("package/") for member in tar.getmembers() if member.isfile())
    return Packed(tarballs[0], files, json.loads(packed_text(tarballs[0], "package.json")))


@pytest.fixture(scope="module")
def scratch(packed: Packed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh project with the tarball installed, offline, and a check that imports every export."""
    project = tmp_path_factory.mktemp("scratch") / "project"
    shutil.copytree(TEMPLATE, project)
    tarball = f"file:{os.path.relpath(packed.tarball, project)}"
    dependencies = {"bounty-client": tarball}
    (project / "package.json").write_text(json.dumps(
        {"name": "scratch", "private": True, "type": "module", "dependencies": dependencies}))
    locked = json.loads((CLIENT / "package-lock.json").read_text())["packages"]
    lockfile = {"name": "scratch", "lockfileVersion": 3, "requires": True, "packages": {
        "": {"name": "scratch", "dependencies": dependencies},
        "node_modules/bounty-client": {"version": packed.manifest["version"], "resolved": tarball,
                                       "dependencies": packed.manifest.get("dependencies", {})},
        # What `npm ci --omit=dev` installs in clients/typescript: viem's tree.
        **{path: entry for path, entry in locked.items()
           if path and not entry.get("dev") and not entry.get("devOptional")},
    }}
    (project / "package-lock.json").write_text(json.dumps(lockfile, indent=1))
    run(["npm", "ci", "--offline"], project,
        "installing the tarball offline (an ENOTCACHED error means the npm cache lacks a package of "
        "clients/typescript/package-lock.json: run `npm ci` in clients/typescript, as scripts/setup does)")
    (project / "every-export.ts").write_text("".join(
        f'export * as export{index} from "{subpath_specifier(subpath)}";\n'
        for index, subpath in enumerate(code_exports(packed.manifest))))
    return project


@pytest.fixture
def approval(builder: TransactionBuilder) -> dict[str, Any]:
    """The approval of AMOUNT as the Python client builds it: the TypeScript client's must be equal."""
    return dict(builder.approve_usdc(AMOUNT))


def test_the_tarball_holds_the_build_of_every_export(packed: Packed) -> None:
    manifest, files = packed.manifest, packed.files
    for subpath, target in manifest["exports"].items():
        conditions = {"default": target} if isinstance(target, str) else target
        for condition, path in conditions.items():
            assert path.removeprefix("./") in files, f'export "{subpath}" ({condition}): {path} is not in the tarball'
        if subpath != "./package.json":
            assert set(conditions) == {"types", "import"}, f'export "{subpath}" has conditions {sorted(conditions)}'
            assert conditions["types"].endswith(".d.ts"), f'export "{subpath}": types is {conditions["types"]}'
    for field in ("main", "types"):
        assert manifest[field].removeprefix("./") in files, f'package.json\'s "{field}" is not in the tarball'
    assert {"README.md", "package.json"} <= files
    extra = sorted(path for path in files if not path.startswith("dist/") and path not in {"README.md", "package.json"})
    assert not extra, f'the tarball holds files beyond dist/, the README and package.json: {extra}'


def test_the_built_modules_import_only_the_declared_dependencies(packed: Packed) -> None:
    imported = {
        "/".join(name.split("/")[:2] if name.startswith("@") else name.split("/")[:1])
        for path in packed.files if path.endswith(".js")
        for name in BARE_IMPORT.findall(packed.read(path))
    }
    undeclared = imported - set(packed.manifest.get("dependencies", {}))
    assert not undeclared, f"dist/ imports packages that package.json's dependencies lack: {sorted(undeclared)}"


@pytest.mark.parametrize("resolution", ["nodenext", "bundler"])
def test_a_strict_typescript_project_type_checks_against_it(scratch: Path, resolution: str) -> None:
    run(["node", TSC, "-p", f"tsconfig.{resolution}.json"], scratch,
        f"tsc --strict with {resolution} resolution on usage.ts, every-export.ts and web/main.ts")


def test_node_imports_every_export_and_builds_a_transaction(
    scratch: Path, packed: Packed, approval: dict[str, Any]
) -> None:
    given = {"deployment": {"chainId": CHAIN_ID, "contractAddress": CONTRACT, "usdcAddress": USDC},
             "amount": str(AMOUNT)}
    found = json.loads(run(["node", "use-in-node.mjs", json.dumps(given)], scratch, "node use-in-node.mjs"))
    assert list(found["exportsOf"]) == code_exports(packed.manifest)
    assert "createTransactionBuilder" in found["exportsOf"]["./transactions"]
    assert found["sameModule"], 'the root and "./transactions" load two copies of the transactions module'
    assert found["version"] == packed.manifest["version"]
    assert found["approval"] == approval


def test_vite_bundles_it_for_the_browser(scratch: Path, approval: dict[str, Any]) -> None:
    web = scratch / "web"
    run(["node", VITE, "build"], web, "vite build of pack_project/web")
    page = (web / "dist" / "index.html").read_text()
    scripts = re.findall(r'<script type="module"[^>]*\bsrc="/([^"]+)"', page)
    assert len(scripts) == 1, f"the built page should load one module script:\n{page}"
    bundle = web / "dist" / scripts[0]
    shown = run(["node", scratch / "run-bundle.mjs", bundle], scratch, f"running the Vite bundle {bundle.name}")
    assert json.loads(shown) == approval
    # "sideEffects": false and the subpath let the bundler leave out what the page does not import.
    assert "expected a page object" not in bundle.read_text(), "the bundle holds the read client"
