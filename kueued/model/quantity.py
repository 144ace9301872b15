"""Exact Kubernetes quantities.

Every amount kueued reasons about is an ``int`` of milli-units ("500m" cpu is 500,
"2" is 2000, "1Gi" is 1073741824000).  Python ints are arbitrary precision, so sums
never overflow and no float ever enters quota arithmetic.  Sub-milli inputs ("1u")
round up, as Kubernetes' own ``MilliValue`` does.

Parsing is bounded, as Kubernetes bounds it: a value is capped at the largest int64
(:data:`MAX_VALUE`) and rounded away from zero to a nano-unit; a mantissa of more than
:data:`MAX_DIGITS` significant digits or an exponent that does not fit an int64 is
refused.  No power is ever computed before the value's magnitude is known to be small,
so a hostile ``1e100000000`` parses as fast as ``1e3``.

``UNLIMITED`` stands for "no limit" (an unset borrowing limit); it is a sentinel far
above any real amount, and :func:`sat_add` keeps it saturated.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

__all__ = ["UNLIMITED", "MAX_VALUE", "QuantityError", "parse", "exact", "format_milli", "sat_add"]

UNLIMITED = 1 << 100
"""An amount larger than anything a cluster holds; used for unset limits."""

_DECIMAL = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_QTY = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+)|([a-zA-Z]*))$")

MAX_VALUE = 2**63 - 1
"""Kubernetes caps a quantity's value at the largest int64 (``resource.Quantity``'s maxAllowed)."""

MAX_DIGITS = 64
"""Significant digits a quantity may have; more is refused (Kubernetes' int64 needs 19)."""

_NANO = Fraction(1, 10**9)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse(value: object) -> int:
    """Parse a quantity ("500m", "2", "1Gi", 3, 0.5) into integer milli-units, rounding up."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return max(-MAX_VALUE, min(MAX_VALUE, value)) * 1000
    if isinstance(value, str):
        return _parse_text(value)
    return _parse_text(str(value))


@functools.lru_cache(maxsize=4096)
def _parse_text(value: str) -> int:
    """A quantity string in milli-units; remembered (a cluster uses a few hundred distinct
    strings, and every Workload event parses all of its pod sets' requests)."""
    milli = exact(value) * 1000
    return -((-milli.numerator) // milli.denominator)  # ceil


def exact(value: object) -> Fraction:
    """A quantity's value as Kubernetes holds it: exact, rounded away from zero to a nano-unit, capped
    at +-:data:`MAX_VALUE`.

    Bounded in time and size whatever the input: the order of magnitude is read from the digits
    and exponents before any power is computed, so ``1e100000000`` costs what ``1e3`` does
    (and is capped, as Kubernetes caps it).
    """
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return Fraction(max(-MAX_VALUE, min(MAX_VALUE, value)))
    text = repr(value) if isinstance(value, float) else str(value)
    return _exact_text(text.strip())


@functools.lru_cache(maxsize=4096)
def _exact_text(text: str) -> Fraction:
    m = _QTY.match(text)
    if m is None or not (m.group(2) or m.group(3)) or (m.group(5) and m.group(5) not in {*_DECIMAL, *_BINARY}):
        raise QuantityError(f"quantities must match the regular expression "
                            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text[:80]!r}")
    sign = -1 if m.group(1) == "-" else 1
    whole, fraction, exponent, suffix = m.group(2), m.group(3) or "", m.group(4), m.group(5) or ""
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return Fraction(0)
    if len(digits) > MAX_DIGITS:
        raise QuantityError(f"a quantity has at most {MAX_DIGITS} significant digits: {text[:80]!r}...")
    if exponent is not None and len(exponent.lstrip("+-")) > 18:
        raise QuantityError(f"the exponent of quantity {text[:80]!r} is out of range")
    power10 = (int(exponent) if exponent is not None else _DECIMAL.get(suffix, 0)) - len(fraction)
    power2 = _BINARY.get(suffix, 0)
    magnitude = len(digits) + power10 + power2 * 0.30103  # log10 of the value, within one
    if magnitude > 21:
        return Fraction(sign * MAX_VALUE)
    if magnitude < -11:
        return sign * _NANO
    amount = Fraction(int(digits)) * Fraction(10) ** power10 * 2**power2
    nanos = -((-amount.numerator * 10**9) // amount.denominator)  # up to a whole nano-unit
    return sign * min(Fraction(MAX_VALUE), Fraction(nanos, 10**9))


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
