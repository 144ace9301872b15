"""The manifest directory: changes are taken over the whole directory, files that are not
manifests are skipped, and problems are state reported once per change."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from kueued.sources import ManifestDirectory, is_manifest_name
from tests.builders import namespace


def _write(path: Path, *names: str) -> None:
    path.write_text(yaml.safe_dump_all([namespace(n) for n in names]))


def _scan(source: ManifestDirectory) -> list[tuple[str, str]]:
    return [(verb, m["metadata"]["name"]) for verb, m in source.scan()]


def test_an_object_moved_to_another_file_is_neither_deleted_nor_applied(tmp_path: Path) -> None:
    _write(tmp_path / "a.yaml", "x", "y")
    source = ManifestDirectory(tmp_path)
    assert _scan(source) == [("apply", "x"), ("apply", "y")]
    _write(tmp_path / "a.yaml", "x")
    _write(tmp_path / "b.yaml", "y")
    assert _scan(source) == []
    (tmp_path / "a.yaml").unlink()
    assert _scan(source) == [("delete", "x")]


def test_hidden_files_and_editor_droppings_are_not_manifests(tmp_path: Path) -> None:
    assert [n for n in (".#org.yaml", "#org.yaml#", "org.yaml~", ".hidden.yaml", "org.yaml", "org.yml",
                        "org.json") if is_manifest_name(n)] == ["org.yaml", "org.yml"]
    os.symlink(tmp_path / "gone", tmp_path / ".#org.yaml")  # an editor's lock: a dangling symlink
    _write(tmp_path / "org.yaml", "x")
    source = ManifestDirectory(tmp_path)
    assert _scan(source) == [("apply", "x")] and source.problems == {}


def test_problems_are_reported_once_per_change_and_old_objects_stay_in_force(tmp_path: Path) -> None:
    _write(tmp_path / "a.yaml", "x")
    os.symlink(tmp_path / "gone.yaml", tmp_path / "dangling.yaml")
    source = ManifestDirectory(tmp_path)
    assert _scan(source) == [("apply", "x")]
    new, cleared = source.problem_changes()
    assert [(Path(p.source).name, "dangling symlink" in p.reason) for p in new] == [("dangling.yaml", True)]
    assert _scan(source) == [] and source.problem_changes() == ([], [])  # the same problem: not again

    (tmp_path / "a.yaml").write_bytes(b"\xff\xfekind: [")  # unreadable now: x stays in force
    assert _scan(source) == []
    new, _ = source.problem_changes()
    assert [Path(p.source).name for p in new] == ["a.yaml"]
    _write(tmp_path / "a.yaml", "x", "z")
    assert _scan(source) == [("apply", "z")]
    assert source.problem_changes() == ([], [str(tmp_path / "a.yaml")])


def test_an_object_defined_twice_is_taken_from_the_first_file(tmp_path: Path) -> None:
    _write(tmp_path / "a.yaml", "x")
    (tmp_path / "b.yaml").write_text(yaml.safe_dump({**namespace("x"), "metadata": {"name": "x",
                                                                                     "labels": {"b": "1"}}}))
    source = ManifestDirectory(tmp_path)
    ((verb, manifest),) = list(source.scan())
    assert manifest["metadata"].get("labels") == {}
    (problem,) = source.problems.values()
    assert problem.source.endswith("b.yaml") and "also defined in" in problem.reason


def test_a_copy_kueued_cannot_read_does_not_shadow_a_later_one_it_can(tmp_path: Path) -> None:
    old = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default"}}
    (tmp_path / "a-old.yaml").write_text(yaml.safe_dump(old))
    (tmp_path / "b-new.yaml").write_text(yaml.safe_dump({**old, "apiVersion": "kueue.x-k8s.io/v1beta2"}))
    source = ManifestDirectory(tmp_path)
    ((verb, manifest),) = list(source.scan())
    assert (verb, manifest["apiVersion"]) == ("apply", "kueue.x-k8s.io/v1beta2")
    (problem,) = source.problems.values()
    assert problem.source.endswith("a-old.yaml") and "b-new.yaml, which is the one in force" in problem.reason
    assert "kueued reads ResourceFlavor as kueue.x-k8s.io/v1beta2" in problem.reason


def test_a_directory_that_cannot_be_listed_deletes_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "m"
    directory.mkdir()
    _write(directory / "a.yaml", "x")
    source = ManifestDirectory(directory)
    assert _scan(source) == [("apply", "x")]
    directory.rename(tmp_path / "elsewhere")
    assert _scan(source) == []
    assert "cannot be read" in source.problems[str(directory)].reason
    (tmp_path / "elsewhere").rename(directory)
    assert _scan(source) == [] and source.problems == {}
