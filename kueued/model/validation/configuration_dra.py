"""The Configuration's ``resources.deviceClassMappings``, checked as Kueue's
``validateDeviceClassMappings`` checks them.

Each mapping names a logical resource (a qualified name, unique) and the DRA device classes
it stands for (one to eight, qualified names).  A device class belongs to one resource; two
mappings may share it only when both count a partitionable device's counters and track
different ones (the first source's counter names the mapping's counter).

Each source is exactly one of a ``counter`` (a DNS label naming a partitionable device's
counter; gate KueueDRAIntegrationPartitionableDevices) or a ``capacity`` (a qualified name;
gate KueueDRAIntegrationConsumableCapacity), never both kinds in one mapping, each with a
driver (a DNS subdomain of at most 63 characters) and a CEL device selector.  The selector is
required but not compiled: kueued has no CEL (Kueue also refuses one that does not compile).
"""

from __future__ import annotations

from collections.abc import Callable

from .configuration_strict import strict
from .fields import Errors, child, index, mapping, sequence, string
from .names import dns_label_errors, dns_subdomain_errors, qualified_name_errors

__all__ = ["device_class_mappings"]

_DRIVER_MAX = 63  # resourcev1.DriverNameMaxLength
_COUNTERS = "KueueDRAIntegrationPartitionableDevices"
_CAPACITY = "KueueDRAIntegrationConsumableCapacity"


def device_class_mappings(errs: Errors, value: object, gate: Callable[[str], bool] = lambda _: True) -> None:
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
        _sources(errs, entry.get("sources"), child(p, "sources"), gate)


def _sources(errs: Errors, value: object, path: str, gate: Callable[[str], bool]) -> None:
    counters = 0
    capacity = False
    listed = sequence(errs, value, path)
    for i, raw in enumerate(listed):
        p = index(path, i)
        source = mapping(errs, raw, p)
        counter, cap = source.get("counter"), source.get("capacity")
        if counter is None and cap is None:
            errs.required(p, "exactly one source type must be set per entry")
            continue
        if counter is not None and cap is not None:
            errs.invalid(p, "counter+capacity", "exactly one source type must be set per entry")
            continue
        if counter is not None:
            counters += 1
            if not gate(_COUNTERS):
                errs.invalid(child(p, "counter"), True, f"counter sources require {_COUNTERS} to be enabled")
                continue
            cp = child(p, "counter")
            body = mapping(errs, counter, cp)
            name = body.get("name")
            if not name:
                errs.required(child(cp, "name"))
            elif isinstance(name, str) and (msgs := dns_label_errors(name)):
                errs.invalid(child(cp, "name"), name, ",".join(msgs))
            _driver_and_selector(errs, body, cp)
        else:
            capacity = True
            if not gate(_CAPACITY):
                errs.invalid(child(p, "capacity"), True, f"capacity sources require {_CAPACITY} to be enabled")
                continue
            cp = child(p, "capacity")
            body = mapping(errs, cap, cp)
            name = string(errs, body.get("name"), child(cp, "name"))
            if name is not None and (msgs := qualified_name_errors(name)):
                errs.invalid(child(cp, "name"), name, "; ".join(msgs))
            _driver_and_selector(errs, body, cp)
    if counters and capacity:
        errs.invalid(path, len(listed), "cannot mix counter and capacity sources in the same mapping")


def _driver_and_selector(errs: Errors, source: dict, path: str) -> None:
    driver = string(errs, source.get("driver"), child(path, "driver"))
    if not driver:
        errs.required(child(path, "driver"))
    elif len(driver) > _DRIVER_MAX:
        errs.invalid(child(path, "driver"), driver, f"must not exceed {_DRIVER_MAX} characters")
    elif msgs := dns_subdomain_errors(driver):
        errs.invalid(child(path, "driver"), driver, ",".join(msgs))
    selector = source.get("deviceSelector")
    cel = selector.get("cel") if isinstance(selector, dict) else None
    expression = cel.get("expression") if isinstance(cel, dict) else None
    if not isinstance(expression, str) or not expression:
        errs.required(child(path, "deviceSelector.cel.expression"))


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
