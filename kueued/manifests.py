"""Reading manifest files: bytes in, manifests (plain mappings) and what could not be read out.

Every path that reads YAML from a file goes through here (``simulate``, ``validate``, the
daemon's manifest directory, the generator), so hostile input meets one set of rules:

- **Text**: UTF-8, with or without a byte-order mark; UTF-16 and UTF-32 only with one (as
  ``kubectl`` decodes).  Anything else is refused with the offset of the first bad byte,
  never a ``UnicodeDecodeError`` traceback.
- **Documents**: a ``---``-separated stream.  A document is a manifest (a mapping with a
  ``kind``), a ``kind: List`` whose ``items`` are manifests, or a conformance scenario (a
  mapping with ``objects``).  Anything else (a scalar, a sequence, ``items: 5``) is a
  :class:`Problem` naming the file and the document's index (from 0, as ``kubectl``
  counts them); the file's other documents are still read.
- **Timestamps** are strings, as in JSON: an unquoted ``2026-01-01T00:00:01Z`` (which YAML
  reads as a date-time) becomes that RFC 3339 string again.
- **Keys** are strings, as in JSON: ``1:`` becomes ``"1"`` (what ``kubectl`` sends).
- **Size**: YAML aliases let a few lines stand for a billion values.  A document whose
  expanded tree exceeds :data:`MAX_VALUES` values, or nests deeper than
  :data:`MAX_DEPTH`, is refused here, so no later walk (validation, equality, JSON) can
  hang on it.  The walk is iterative: no recursion over user-controlled depth.

:func:`read_manifests` never raises: it returns what it could read beside the problems.
:func:`load_manifests` is the strict form for callers that want all or nothing.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import yaml

from kueued.errors import ManifestError
from kueued.model.validation.fields import type_name

__all__ = ["MAX_DEPTH", "MAX_VALUES", "Problem", "Loaded", "decode_text", "read_manifests", "yaml_reason",
           "load_manifests", "parse_documents"]

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster

MAX_VALUES = 1_000_000
"""Values (mappings, sequences and scalars, aliases expanded) one document may hold."""

MAX_DEPTH = 200
"""Nesting depth of one document; no Kubernetes object of ours comes near it."""

_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


class Problem(msgspec.Struct, frozen=True):
    """A file, or one document of it, that could not be read as manifests."""

    source: str              # the file's path, as given
    reason: str
    document: int | None = None

    @property
    def where(self) -> str:
        return self.source if self.document is None else f"{self.source}#{self.document}"

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


class Loaded(NamedTuple):
    manifests: list[dict[str, Any]]
    problems: list[Problem]


def decode_text(data: bytes, *, source: str) -> str:
    """Bytes as text, by their byte-order mark or else as UTF-8; :class:`ManifestError` if neither."""
    encoding = next((enc for bom, enc in _BOMS if data.startswith(bom)), "utf-8")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{source}: not {encoding.upper().removesuffix('-SIG')} text: byte "
                            f"0x{data[exc.start]:02x} at offset {exc.start} "
                            f"(manifests are UTF-8; UTF-16 and UTF-32 need a byte-order mark)") from exc
    if "\x00" in text:
        raise ManifestError(f"{source}: holds NUL characters, first at offset {text.index(chr(0))} "
                            "(UTF-16 or UTF-32 without a byte-order mark?)")
    return text


def read_manifests(paths: Iterable[str | Path]) -> Loaded:
    """Every manifest the files hold, in order, and a :class:`Problem` for each part that failed."""
    loaded = Loaded([], [])
    for path in paths:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            loaded.problems.append(Problem(str(path), f"cannot be read: {exc.strerror or exc}"))
            continue
        try:
            text = decode_text(data, source=str(path))
        except ManifestError as exc:
            loaded.problems.append(Problem(str(path), str(exc).removeprefix(f"{path}: ")))
            continue
        manifests, problems = parse_documents(text, source=str(path))
        loaded.manifests.extend(manifests)
        loaded.problems.extend(problems)
    return loaded


def load_manifests(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Every manifest the files hold; :class:`ManifestError` naming the first problem, if any."""
    manifests, problems = read_manifests(paths)
    if problems:
        raise ManifestError(str(problems[0]) + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))
    return manifests


def parse_documents(text: str, *, source: str) -> Loaded:
    """The manifests of one YAML stream, each document read on its own (as ``kubectl`` splits a
    stream on ``---`` lines): a syntax error costs its document only."""
    loaded = Loaded([], [])
    for index, (first_line, chunk) in enumerate(_documents(text)):
        try:
            doc = yaml.load(chunk, Loader=_LOADER)
            if doc is None:
                continue
            _bounded(doc)
            manifests, bad = _manifests_of(doc)
            loaded.manifests.extend(manifests)
            if bad:  # the list's other manifests still count: a bad entry costs only itself
                loaded.problems.append(Problem(source, bad, index))
        except ManifestError as exc:
            loaded.problems.append(Problem(source, str(exc), index))
        except yaml.YAMLError as exc:
            loaded.problems.append(Problem(source, yaml_reason(exc, first_line=first_line), index))
        except (ValueError, OverflowError) as exc:  # a scalar PyYAML cannot build: a 5,000-digit int, 2026-13-45
            why = "an integer has more than 4,300 digits" if "integer string conversion" in str(exc) else str(exc)
            loaded.problems.append(Problem(source, f"a value cannot be read: {why[:200]}", index))
        except RecursionError:  # the pure-Python parser on a deep flow collection
            loaded.problems.append(Problem(source, f"nests deeper than {MAX_DEPTH} levels", index))
    return loaded


def _documents(text: str) -> list[tuple[int, str]]:
    """(first line, text) of each document with content; a ``---`` line starts a new one."""
    out: list[tuple[int, str]] = []
    lines: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(keepends=True)):
        if line.startswith("---") and (len(line.rstrip("\r\n")) == 3 or line[3] in " \t"):
            if _has_content(lines):
                out.append((start, "".join(lines)))
            lines, start = [], number
        lines.append(line)
    if _has_content(lines):
        out.append((start, "".join(lines)))
    return out


def _has_content(lines: list[str]) -> bool:
    for line in lines:
        text = line.strip()
        if text and not text.startswith("#") and text not in ("---", "..."):
            return True
    return False


def yaml_reason(exc: yaml.YAMLError, *, first_line: int = 0) -> str:
    """PyYAML's message without its ``in "<unicode string>"`` (the file is named by the Problem)."""
    if isinstance(exc, yaml.reader.ReaderError):
        return f"not valid YAML: {exc.reason} (character {exc.character!r} at offset {exc.position})"
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(p for p in (exc.context, exc.problem) if p)
        where = f" (line {first_line + mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        return f"not valid YAML: {what}{where}"
    return f"not valid YAML: {exc}"


def _manifests_of(doc: Any) -> tuple[list[dict[str, Any]], str]:
    """The manifests a document holds, and what is wrong with the entries that are none ("" if nothing)."""
    if not isinstance(doc, dict):
        raise ManifestError(f"expected a manifest (a mapping with apiVersion, kind and metadata), "
                            f"got {_what(doc)}")
    if "objects" in doc and "kind" not in doc:  # a conformance scenario
        return _items(doc["objects"], field="objects")
    if doc.get("kind") == "List" or (isinstance(doc.get("kind"), str) and doc["kind"].endswith("List")
                                     and "items" in doc):
        return _items(doc.get("items"), field="items")
    return [doc], ""


def _items(items: Any, *, field: str) -> tuple[list[dict[str, Any]], str]:
    if items is None:
        return [], ""
    if not isinstance(items, list):
        raise ManifestError(f"{field}: must be a list of manifests, got {_what(items)}")
    bad = [i for i, item in enumerate(items) if not isinstance(item, dict)]
    problem = ""
    if bad:
        problem = (f"{field}[{bad[0]}]: must be a manifest (a mapping), got {_what(items[bad[0]])}"
                   + (f" ({len(bad) - 1} more items like it)" if len(bad) > 1 else ""))
    return [item for item in items if isinstance(item, dict)], problem


def _what(value: Any) -> str:
    name = type_name(value)  # the API server's words for JSON types: string, integer, array, ...
    return ("an " if name[0] in "aeiou" else "a ") + name


def _stringify_keys(mapping: dict[Any, Any]) -> None:
    """Keys as JSON has them (``1:`` is ``"1"``, ``true:`` is ``"true"``), as sigs.k8s.io/yaml converts."""
    items = list(mapping.items())
    mapping.clear()
    for k, v in items:
        key = k if isinstance(k, str) else "null" if k is None else str(k).lower() if isinstance(k, bool) else str(k)
        mapping[key] = v


def _rfc3339(value: date) -> str:
    """A YAML timestamp as the string the API server would have received (``2026-01-01T00:00:01Z``)."""
    if not isinstance(value, datetime):
        return value.isoformat()
    if value.tzinfo is None:  # YAML's zone-less timestamps are UTC
        value = value.replace(tzinfo=UTC)
    text = value.astimezone(UTC).isoformat()
    return text.replace("+00:00", "Z")


def _bounded(doc: Any) -> None:
    """Refuse a document whose expanded tree is too large or too deep, in O(MAX_VALUES) at worst."""
    count = 0
    stack: list[tuple[Any, int]] = [(doc, 0)]
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise ManifestError(f"holds more than {MAX_VALUES:,} values once YAML aliases are expanded")
        if depth > MAX_DEPTH:
            raise ManifestError(f"nests deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            if not all(isinstance(k, str) for k in value):
                _stringify_keys(value)
            for k, v in value.items():
                if isinstance(v, date):
                    value[k] = _rfc3339(v)
                else:
                    stack.append((v, depth + 1))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                if isinstance(v, date):
                    value[i] = _rfc3339(v)
                else:
                    stack.append((v, depth + 1))
