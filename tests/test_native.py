"""The compiled engine's guard (kueued/native.py): an old build never runs, and never half of one.

``KUEUED_REQUIRE_COMPILED=1`` (CI sets it) makes a pure install a failure here: CI's figures
are the compiled engine's, and a build that fell back to pure must not pass unseen.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kueued import native

ROOT = Path(__file__).resolve().parent.parent


def _tree(tmp_path: Path) -> Path:
    """A copy of the compiled modules' sources and a manifest that matches them."""
    for module in native.COMPILED:
        dest = native.source_path(module, tmp_path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(native.source_path(module), dest)
    digests = {m: native.source_digest(native.source_path(m, tmp_path)) for m in native.COMPILED}
    (tmp_path / "kueued" / native.MANIFEST).write_text(json.dumps(digests))
    return tmp_path


def test_a_build_that_matches_its_sources_is_used(tmp_path: Path) -> None:
    assert native.why_pure({}, _tree(tmp_path)) is None


def test_an_edited_source_sends_every_module_to_its_source(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    edited = native.source_path("kueued.scheduling.cycle", root)
    edited.write_text(edited.read_text() + "\n# an edit\n")
    assert native.why_pure({}, root) == "kueued.scheduling.cycle changed since it was compiled (make rebuilds it)"


def test_no_manifest_an_unreadable_one_or_the_switch_mean_pure(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    assert native.why_pure({"KUEUED_PURE": "1"}, root) == "KUEUED_PURE is set"
    assert native.why_pure({"KUEUED_PURE": "0"}, root) is None
    manifest = root / "kueued" / native.MANIFEST
    manifest.write_text("[1, 2]")
    assert native.why_pure({}, root) == f"{native.MANIFEST} is not a mapping"
    manifest.write_text("{not json")
    assert (native.why_pure({}, root) or "").startswith(f"{native.MANIFEST} is unreadable")
    manifest.unlink()
    assert native.why_pure({}, root) == "built without mypyc"


def test_an_install_without_sources_trusts_its_extensions(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    native.source_path("actors.node", root).unlink()
    assert native.why_pure({}, root) is None


def _imported_files(env: dict[str, str]) -> dict[str, str]:
    code = ("import importlib, json, kueued.native as n\n"
            "print(json.dumps({'engine': n.engine(), **{m: importlib.import_module(m).__file__ "
            "for m in n.COMPILED}}))")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                         check=True)
    files: dict[str, str] = json.loads(out.stdout)
    return files


def test_pure_loads_every_compiled_module_from_its_source() -> None:
    files = _imported_files({**os.environ, "KUEUED_PURE": "1"})
    assert files.pop("engine") == "pure Python (KUEUED_PURE is set)"
    assert all(f.endswith(".py") for f in files.values()), files


def test_the_installed_engine_and_its_sources_decide_alike(tmp_path: Path) -> None:
    """Compiled or not, ``simulate`` decides the same, on the example and on a generated tree of
    40 queues under 4 cohort levels, preempting, 600 Workloads over a virtual clock."""
    tree = tmp_path / "tree.yaml"
    tree.write_text(subprocess.run([sys.executable, "bench/generate_tree.py", "--cluster-queues", "40",
                                    "--workloads", "600", "--runtime", "5"], cwd=ROOT, capture_output=True,
                                   text=True, check=True).stdout)
    for manifests in (ROOT / "config/examples/organisation.yaml", tree):
        pure, installed = _simulate(manifests, pure="1"), _simulate(manifests, pure="0")
        if "summary" in pure:  # the timed tree: every Workload admitted, some of them preempted
            assert pure["summary"]["finished"] == 600 and pure["summary"]["evictions"] > 0
        else:
            assert any(w["state"] == "admitted" for w in pure["workloads"].values())
        assert installed == pure, manifests.name


def _simulate(manifests: Path, *, pure: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "kueued.cli", "simulate", str(manifests), "--output", "json"],
                         env={**os.environ, "KUEUED_PURE": pure}, cwd=ROOT, capture_output=True, text=True,
                         check=True)
    result = _without_host_time(json.loads(out.stdout))
    assert isinstance(result, dict)
    return result


def _without_host_time(x: object) -> object:
    if isinstance(x, dict):
        return {k: _without_host_time(v) for k, v in x.items() if k != "hostSeconds"}
    if isinstance(x, list):
        return [_without_host_time(v) for v in x]
    return x


def test_the_installed_engine_is_all_compiled_or_all_source() -> None:
    env = {k: v for k, v in os.environ.items() if k != "KUEUED_PURE"}
    files = _imported_files(env)
    engine = files.pop("engine")
    compiled = [m for m, f in files.items() if not f.endswith(".py")]
    if engine == "compiled (mypyc)":
        assert compiled == list(native.COMPILED)
    else:
        assert compiled == [], (engine, compiled)
        if os.environ.get("KUEUED_REQUIRE_COMPILED") == "1":
            pytest.fail(f"KUEUED_REQUIRE_COMPILED=1, but the engine is {engine}")


def test_make_rebuilds_when_any_compiled_source_changes() -> None:
    """The Makefile's list of sources the compiled build depends on is COMPILED's."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make here")
    db = subprocess.run([make, "-pn", "--no-print-directory", "-f", "Makefile", "NATIVE_SOURCES"], cwd=ROOT,
                        capture_output=True, text=True).stdout
    line = next(ln for ln in db.splitlines() if ln.startswith("NATIVE_SOURCES :="))
    assert line.split(":=", 1)[1].split() == [str(native.source_path(m).relative_to(ROOT)) for m in native.COMPILED]
