"""``kubectl-kueued``: the same ``main`` under kubectl's plugin name, so ``kubectl kueued status`` works."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

from tests.ops.ops_trees import two_levels

ROOT = Path(__file__).parents[2]
SCRIPT = Path(sys.executable).parent / "kubectl-kueued"


def test_pyproject_installs_kubectl_kueued_pointing_at_the_same_main() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-kueued"] == scripts["kueued"] == "kueued.cli:main"


def test_the_installed_script_behaves_like_kueued(tmp_path: Path) -> None:
    assert SCRIPT.is_file(), f"{SCRIPT} is missing: refresh the entry points with `pip install -e . --no-deps`"
    path = tmp_path / "tree.yaml"
    path.write_text(yaml.safe_dump_all(two_levels()))
    args = ["status", str(path), "--output", "json"]
    plugin = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=120)
    kueued = subprocess.run([sys.executable, "-m", "kueued.cli", *args], capture_output=True, text=True, timeout=120)
    assert (plugin.returncode, kueued.returncode) == (0, 0), plugin.stderr + kueued.stderr
    assert plugin.stdout == kueued.stdout and '"ClusterQueue/vision"' in plugin.stdout
