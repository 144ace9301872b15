"""Reading manifest files: hostile bytes and shapes are problems naming the file and document,
never exceptions, and never cost the file's other documents."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from kueued.errors import ManifestError
from kueued.manifests import MAX_VALUES, load_manifests, parse_documents, read_manifests

NS = "apiVersion: v1\nkind: Namespace\nmetadata: {name: good}\n"


def _read(tmp_path: Path, data: bytes | str) -> tuple[list[dict], list]:
    path = tmp_path / "m.yaml"
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return read_manifests([path])


@pytest.mark.parametrize("data, why", [
    pytest.param("kind: Namespace\nmetadata: {name: café}\n".encode("latin-1"), "not UTF-8 text: byte 0xe9",
                 id="latin-1"),
    pytest.param(b"\x80\x81\x82garbage", "not UTF-8 text: byte 0x80 at offset 0", id="random-bytes"),
    pytest.param(NS.encode("utf-16-le"), "NUL characters", id="utf-16-without-bom"),
])
def test_text_that_is_not_utf8_is_a_problem_naming_the_file(tmp_path: Path, data: bytes, why: str) -> None:
    manifests, problems = _read(tmp_path, data)
    assert manifests == []
    (problem,) = problems
    assert problem.source.endswith("m.yaml") and why in problem.reason


@pytest.mark.parametrize("bom, encoding", [
    pytest.param(codecs.BOM_UTF8, "utf-8", id="utf-8"),
    pytest.param(codecs.BOM_UTF16_LE, "utf-16-le", id="utf-16-le"),
    pytest.param(codecs.BOM_UTF16_BE, "utf-16-be", id="utf-16-be"),
])
def test_a_byte_order_mark_says_the_encoding(tmp_path: Path, bom: bytes, encoding: str) -> None:
    manifests, problems = _read(tmp_path, bom + NS.encode(encoding))
    assert problems == [] and manifests[0]["metadata"]["name"] == "good"


@pytest.mark.parametrize("document, why", [
    pytest.param("kind: List\nitems: [5, x]\n", "items[0]: must be a manifest (a mapping), got an integer",
                 id="list-items"),
    pytest.param("kind: List\nitems: 5\n", "items: must be a list of manifests, got an integer", id="items-5"),
    pytest.param("objects: 5\n", "objects: must be a list of manifests", id="objects-5"),
    pytest.param("just a scalar\n", "expected a manifest (a mapping with apiVersion, kind and metadata), got a string",
                 id="scalar"),
    pytest.param("- a\n- b\n", "got an array", id="sequence"),
    pytest.param("kind: [unclosed\n", "not valid YAML", id="syntax"),
    pytest.param("count: " + "9" * 5000 + "\n", "an integer has more than 4,300 digits", id="huge-int"),
    pytest.param("metadata: " + "[" * 300 + "]" * 300 + "\n", "nests deeper than", id="deep"),
])
def test_a_bad_document_is_a_problem_and_its_neighbours_are_read(tmp_path: Path, document: str, why: str) -> None:
    manifests, problems = _read(tmp_path, f"{NS}---\n{document}---\n{NS.replace('good', 'after')}")
    assert [m["metadata"]["name"] for m in manifests] == ["good", "after"]
    (problem,) = problems
    assert problem.document == 1 and why in problem.reason
    assert str(problem).startswith(f"{tmp_path / 'm.yaml'}#1: ")
    assert "<unicode string>" not in str(problem) and "sys.set_int_max_str_digits" not in str(problem)


def test_a_list_s_good_manifests_are_read_beside_its_bad_entries(tmp_path: Path) -> None:
    """A scenario's ``objects`` (or a List's ``items``) with entries that are not manifests: those are
    the problem, named by index; the manifests beside them still count."""
    scenario = ("objects:\n- {apiVersion: v1, kind: Namespace, metadata: {name: kept}}\n- 5\n"
                "- {apiVersion: v1, kind: Namespace, metadata: {name: also}}\n- [x]\n")
    manifests, (problem,) = _read(tmp_path, scenario)
    assert [m["metadata"]["name"] for m in manifests] == ["kept", "also"]
    assert problem.reason == "objects[1]: must be a manifest (a mapping), got an integer (1 more items like it)"


def test_a_syntax_error_is_placed_on_the_file_s_line(tmp_path: Path) -> None:
    _, (problem,) = _read(tmp_path, f"{NS}---\n{NS}---\nkind: Namespace\nmetadata: {{name: [\n")
    assert "(line 11, column 1)" in problem.reason  # the end of the file, where it noticed


@pytest.mark.timeout(30)
def test_aliases_that_expand_to_a_billion_values_are_refused(tmp_path: Path) -> None:
    levels = "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]\n" for i in range(1, 9))
    _, (problem,) = _read(tmp_path, "l0: &l0 [a, a, a, a, a, a, a, a, a, a]\n" + levels + "kind: Namespace\n")
    assert f"more than {MAX_VALUES:,} values" in problem.reason


def test_values_are_what_json_would_carry(tmp_path: Path) -> None:
    (manifest,), _ = _read(tmp_path, "kind: Workload\nmetadata: {creationTimestamp: 2026-01-01T00:00:01Z}\n"
                                     "data: {1: one, 2.5: two}\n")
    assert manifest["metadata"]["creationTimestamp"] == "2026-01-01T00:00:01Z"
    assert manifest["data"] == {"1": "one", "2.5": "two"}


def test_a_missing_file_is_a_problem_and_the_strict_form_raises(tmp_path: Path) -> None:
    manifests, (problem,) = read_manifests([tmp_path / "nope.yaml"])
    assert manifests == [] and "cannot be read" in problem.reason
    with pytest.raises(ManifestError, match="nope.yaml: cannot be read"):
        load_manifests([tmp_path / "nope.yaml"])


def test_documents_split_as_kubectl_splits_them() -> None:
    text = "# a comment only\n---\n--- {apiVersion: v1, kind: Namespace, metadata: {name: a}}\n---\n...\n"
    manifests, problems = parse_documents(text, source="x")
    assert problems == [] and [m["metadata"]["name"] for m in manifests] == ["a"]
