"""The Configuration's ``resources.deviceClassMappings``, checked as Kueue's
``validateDeviceClassMappings`` checks them.

Each mapping names a logical resource (a qualified name, unique) and the DRA device classes
it stands for (one to eight, qualified names).  A device class belongs to one resource; two
mappings may share it only when both count a partitionable device's counters and track
different ones (the first source's counter names the mapping's counter).  The ``sources``
themselves (drivers, CEL selectors, the gates they need) are not checked here.
"""

from __future__ import annotations

from .configuration_strict import strict
from .fields import Errors, child, index, mapping, sequence, string
from .names import qualified_name_errors

__all__ = ["device_class_mappings"]


def device_class_mappings(errs: Errors, value: object) -> None:
    """``validateDeviceClassMappings``: names and device classes (the DRA ``sources`` are not checked)."""
    path = "resources.deviceClassMappings"
    mappings = sequence(errs, value, path)
    if len(mappings) > 16:
        errs.too_many(path, len(mappings), 16)
    names: set[str] = set()
    owner: dict[str, str] = {}  # device class -> the resource it was first mapped to
    counters: dict[str, set[str]] = {}  # device class -> counter names its mappings track
    for i, raw in enumerate(mappings):
        p = index(path, i)
        entry = mapping(errs, raw, p)
        strict(errs, entry, p, frozenset({"name", "deviceClassNames", "sources"}))
        name = string(errs, entry.get("name"), child(p, "name"))
        if name is not None:
            _qualified(errs, name, child(p, "name"))
            if name in names:
                errs.duplicate(child(p, "name"), name)
            names.add(name)
        classes_path = child(p, "deviceClassNames")
        classes = sequence(errs, entry.get("deviceClassNames"), classes_path)
        if not classes:
            errs.required(classes_path, "at least one device class name is required")
        elif len(classes) > 8:
            errs.too_many(classes_path, len(classes), 8)
        counter = _counter_name(entry.get("sources"))
        own: set[str] = set()
        for j, raw_class in enumerate(classes):
            dc = string(errs, raw_class, index(classes_path, j))
            if dc is None:
                continue
            _qualified(errs, dc, index(classes_path, j))
            if dc in own:
                errs.duplicate(index(classes_path, j), dc)
            own.add(dc)
            if dc not in owner:
                owner[dc], counters[dc] = name or "", {counter} if counter else set()
            elif owner[dc] != name:
                # Two mappings may share a class only when each tracks its own counter.
                if not counter or not counters[dc]:
                    errs.invalid(index(classes_path, j), dc, f"device class already mapped to resource {owner[dc]}")
                elif counter in counters[dc]:
                    errs.invalid(index(classes_path, j), dc,
                                 f'device class already has a counter source for counter "{counter}"')
                else:
                    counters[dc].add(counter)


def _qualified(errs: Errors, value: str, path: str) -> None:
    if msgs := qualified_name_errors(value):
        errs.invalid(path, value, "; ".join(msgs))
    if len(value) > 253:
        errs.invalid(path, value, "must not exceed 253 characters")


def _counter_name(sources: object) -> str:
    first = sources[0] if isinstance(sources, list) and sources else None
    counter = first.get("counter") if isinstance(first, dict) else None
    name = counter.get("name") if isinstance(counter, dict) else None
    return name if isinstance(name, str) else ""
