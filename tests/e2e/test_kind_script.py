"""``make e2e-kind`` where kind cannot run: one line saying so, exit 0, nothing run.

The script is run with a PATH of our making (a directory with ``bash`` and, per case, a fake
``docker`` or ``kind`` that leaves a mark if anything calls it past the check), so the
result does not depend on what this machine has installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "e2e" / "kind.sh"
LINE = "e2e-kind: docker/kind not available here; the kind suite runs on machines that have them\n"


def _path(tmp_path: Path, **fakes: str) -> tuple[dict[str, str], Path]:
    """An environment whose PATH holds bash and the fake programs given (name: exit code); where marks go."""
    bin_dir, marks = tmp_path / "bin", tmp_path / "marks"
    bin_dir.mkdir()
    marks.mkdir()
    bash = shutil.which("bash")
    assert bash is not None
    (bin_dir / "bash").symlink_to(bash)
    for name, code in fakes.items():
        fake = bin_dir / name
        fake.write_text(f'#!{bash}\necho "$*" >> "{marks}/{name}"\nexit {code}\n')
        fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    return env | {"PATH": str(bin_dir)}, marks


@pytest.mark.parametrize("fakes, called", [
    pytest.param({}, {}, id="neither docker nor kind"),
    pytest.param({"docker": "0"}, {}, id="no kind"),
    pytest.param({"kind": "0"}, {}, id="no docker"),
    pytest.param({"docker": "1", "kind": "0"}, {"docker": "info\n"}, id="docker's daemon does not answer"),
])
def test_the_script_says_so_in_one_line_and_runs_nothing(tmp_path: Path, fakes: dict[str, str],
                                                         called: dict[str, str]) -> None:
    env, marks = _path(tmp_path, **fakes)
    result = subprocess.run([str(SCRIPT)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert (result.returncode, result.stdout, result.stderr) == (0, LINE, "")
    assert {mark.name: mark.read_text() for mark in marks.iterdir()} == called  # kind was never run


def test_make_e2e_kind_says_so_in_one_line(tmp_path: Path) -> None:
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make here")
    env, marks = _path(tmp_path, docker="1", kind="0")
    result = subprocess.run([make, "-s", "e2e-kind"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=30)
    assert (result.returncode, result.stdout, result.stderr) == (0, LINE, "")
    assert not (marks / "kind").exists()
