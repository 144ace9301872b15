"""Verdicts remembered by content, for the parts of an object a batch system repeats.

Kueue's large-scale run applies 50,000 Workloads with 3,000 distinct specs (a queue, a
priority and one of three pod sets); checking the same spec again for each of them was
most of what validating a Workload cost.  A :class:`VerdictMemo` remembers, for one check,
the errors (and whatever the check returns) by the exact content checked and the path it
was checked at, and replays them.  Only checks whose verdict depends on nothing but that
content and path go through a memo: a Workload's spec and its pod templates do; metadata,
whose errors name the object, does not, nor does anything compared with an older version.

The key is the content's msgpack encoding.  Encodings can coincide where values differ in
type (a YAML date and the string it spells, a set and a list), so a hit also requires the
remembered content, decoded back from the key, to equal the value now checked.  Content
that does not survive that round trip (those, and NaN, which equals nothing) is checked
afresh every time, as is content msgpack cannot encode (a 2**70 integer).  A memo
holds at most ``maxsize`` verdicts and forgets them all when full: the shapes that repeat
come straight back, and a flood of distinct ones cannot grow it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import msgspec

from kueued.errors import FieldError

from .fields import Errors

__all__ = ["VerdictMemo"]

R = TypeVar("R")

_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder().decode


class VerdictMemo(Generic[R]):
    """One check's verdicts by (path, content): the errors it added and what it returned.

    What the check returns is handed out shared: callers must treat it as read-only.
    """

    __slots__ = ("_check", "_maxsize", "_verdicts")

    def __init__(self, check: Callable[[Errors, object, str], R], *, maxsize: int) -> None:
        self._check = check
        self._maxsize = maxsize
        self._verdicts: dict[tuple[str, bytes], tuple[object, tuple[FieldError, ...], R]] = {}

    def __len__(self) -> int:
        return len(self._verdicts)

    def clear(self) -> None:
        self._verdicts.clear()

    def __call__(self, errs: Errors, value: object, path: str) -> R:
        """Add the check's errors for ``value`` at ``path`` to ``errs``; return its result."""
        try:
            key = (path, _encode(value))
        except (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError):
            return self._check(errs, value, path)
        found = self._verdicts.get(key)
        if found is not None and found[0] == value:
            errs.items.extend(found[1])
            return found[2]
        fresh = Errors()
        result = self._check(fresh, value, path)
        errs.items.extend(fresh.items)
        if found is None:
            try:
                content = _decode(key[1])
            except (TypeError, ValueError, msgspec.DecodeError):  # a tuple key came back a list
                return result
            if content == value:  # else a lossy encoding: never remembered
                if len(self._verdicts) >= self._maxsize:
                    self._verdicts.clear()
                self._verdicts[key] = (content, tuple(fresh.items), result)
        return result
