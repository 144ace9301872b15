"""Exact Kubernetes quantities.

Every amount kueued reasons about is an ``int`` of milli-units ("500m" cpu is 500,
"2" is 2000, "1Gi" is 1073741824000).  Python ints are arbitrary precision, so sums
never overflow and no float ever enters quota arithmetic.  Sub-milli inputs ("1u")
round up, as Kubernetes' own ``MilliValue`` does.

``UNLIMITED`` stands for "no limit" (an unset borrowing limit); it is a sentinel far
above any real amount, and :func:`sat_add` keeps it saturated.
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

__all__ = ["UNLIMITED", "QuantityError", "parse", "format_milli", "sat_add"]

UNLIMITED = 1 << 100
"""An amount larger than anything a cluster holds; used for unset limits."""

_SUFFIX: dict[str, Fraction] = {
    "": Fraction(1), "m": Fraction(1, 1000), "u": Fraction(1, 10**6), "n": Fraction(1, 10**9),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
_QTY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse(value: object) -> int:
    """Parse a quantity ("500m", "2", "1Gi", 3, 0.5) into integer milli-units, rounding up."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, str):
        return _parse_text(value)
    return _parse_text(str(value))


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> int:
    """A quantity string in milli-units; remembered (a cluster uses a few hundred distinct
    strings, and every Workload event parses all of its pod sets' requests)."""
    text = value.strip()
    m = _QTY.match(text)
    if not m or m.group(2) not in _SUFFIX:
        raise QuantityError(f"quantities must match the regular expression "
                            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {value!r}")
    try:
        number = Fraction(Decimal(m.group(1)))
    except InvalidOperation as exc:  # pragma: no cover - the regex already screens
        raise QuantityError(f"not a quantity: {value!r}") from exc
    milli = number * _SUFFIX[m.group(2)] * 1000
    return -((-milli.numerator) // milli.denominator)  # ceil


def format_milli(amount: int, *, resource: str = "") -> str:
    """Render milli-units as the shortest exact quantity string ("500m", "2", "3Gi")."""
    if amount >= UNLIMITED:
        return "unlimited"
    if amount % 1000:
        return f"{amount}m"
    whole = amount // 1000
    if resource not in ("cpu",) and whole and whole % (2**30) == 0:
        return f"{whole // 2**30}Gi"
    if resource not in ("cpu",) and whole and whole % (2**20) == 0:
        return f"{whole // 2**20}Mi"
    return str(whole)


def sat_add(a: int, b: int) -> int:
    """Add, keeping UNLIMITED saturated."""
    if a >= UNLIMITED or b >= UNLIMITED:
        return UNLIMITED
    return a + b
