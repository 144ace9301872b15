"""Dominant resource share: how far a node of the cohort tree lives off its siblings.

Kueue's ``pkg/cache/scheduler/fair_sharing.go``.  For a node with a parent (a
ClusterQueue or a Cohort), per (flavor, resource) the *borrowed* amount is what its
usage exceeds its subtree quota by; borrowed amounts add up per resource (across
flavors).  Each resource's ratio is ``borrowed * 1000 / lendable``, where
``lendable`` is what the parent could ever hand out of that resource (the sum over
flavors of ``potential_available(parent)``).  The *dominant* resource is the one with
the highest ratio (ties by name); a node that borrows nothing has share 0, and so has
a root.

The weighted share is ``ratio / weight`` (``spec.fairSharing.weight``, default 1).
Weight 0 is special: such a node's share is 0 while it does not borrow and +Inf as
soon as it does, and :func:`compare` ranks every zero-weight borrower above every
finite share, ordering two of them by their unweighted ratios.

Everything is exact: ratios and weights are ``Fraction`` (Kueue uses float64; exact
arithmetic only ever turns one of its rounding accidents into a tie, and the scenarios'
"exact ties", 222 <= 222, are ties in both).  A :class:`Shares` calculator belongs to
one snapshot and caches what depends on quota alone (weights, lendable capacity).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from fractions import Fraction

from kueued.model import api
from kueued.model.quantity import parse
from kueued.quota import node as qn
from kueued.quota.node import FR, QuotaNode
from kueued.scheduling.snapshot import Snapshot

__all__ = ["DRS", "NEGATIVE", "Shares", "compare", "parse_weight", "dominant_resource_share",
           "lendable"]


def parse_weight(fs: api.FairSharing | None) -> Fraction:
    """``spec.fairSharing.weight`` as an exact number; unset means 1."""
    if fs is None or fs.weight is None:
        return Fraction(1)
    return Fraction(parse(fs.weight), 1000)


class DRS:
    """One node's dominant resource share, with what precise comparisons need."""

    __slots__ = ("weight", "ratio", "dominant", "borrowed")

    def __init__(self, weight: Fraction, ratio: Fraction = Fraction(0), dominant: str = "",
                 borrowed: frozenset[FR] = frozenset()) -> None:
        self.weight = weight
        self.ratio = ratio          # unweighted, per mille of the lendable amount
        self.dominant = dominant
        self.borrowed = borrowed    # the FRs on which usage exceeds the subtree quota

    @property
    def borrowing(self) -> bool:
        return bool(self.borrowed)

    @property
    def is_zero(self) -> bool:
        """Unweighted ratio 0; a node may borrow and still be zero (nothing lendable)."""
        return self.ratio == 0

    @property
    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and self.borrowing

    def borrowing_on(self, requested: Iterable[FR]) -> bool:
        return any(fr in self.borrowed for fr in requested)

    def weighted(self) -> Fraction | float:
        """The precise weighted share; ``math.inf`` for a zero-weight borrower."""
        if self.zero_weight_borrows:
            return math.inf
        if self.is_zero:
            return Fraction(0)
        return self.ratio / self.weight

    def rounded(self) -> int:
        """The status field ``weightedShare``: ceil of the weighted share."""
        share = self.weighted()
        return 2**63 - 1 if share == math.inf else math.ceil(share)

    def key(self) -> tuple[int, Fraction | float]:
        """Sort key agreeing with :func:`compare`."""
        if self.zero_weight_borrows:
            return (1, self.ratio)
        return (0, self.weighted())

    def __repr__(self) -> str:
        return f"DRS({float(self.weighted()):.1f} {self.dominant or '-'})"


NEGATIVE = DRS(Fraction(1), Fraction(-1))
"""Below every real share: the starting point of a maximum search."""


def compare(a: DRS, b: DRS) -> int:
    """Kueue's ``CompareDRS``: -1 if ``a`` should be scheduled before ``b`` (lower share)."""
    ka, kb = a.key(), b.key()
    return (ka > kb) - (ka < kb)


def lendable(node: QuotaNode) -> dict[str, int]:
    """Per resource, what ``node`` could ever hand out, summed over flavors."""
    out: dict[str, int] = {}
    for fr in node.root().subtree:
        out[fr[1]] = out.get(fr[1], 0) + qn.potential_available(node, fr)
    return out


def dominant_resource_share(node: QuotaNode, weight: Fraction, *, extra: Mapping[FR, int] | None = None,
                            lendable_of_parent: Mapping[str, int] | None = None) -> DRS:
    """The share of ``node``, as if ``extra`` were added to its own usage."""
    if node.parent is None:
        return DRS(weight)
    extra = extra or {}
    per_resource: dict[str, int] = {}
    borrowed: list[FR] = []
    for fr, quota in node.subtree.items():
        over = extra.get(fr, 0) + node.usage.get(fr, 0) - quota
        if over > 0:
            per_resource[fr[1]] = per_resource.get(fr[1], 0) + over
            borrowed.append(fr)
    if not per_resource:
        return DRS(weight)
    capacity = lendable_of_parent if lendable_of_parent is not None else lendable(node.parent)
    ratio, dominant = Fraction(0), ""
    for res in sorted(per_resource):
        cap = capacity.get(res, 0)
        if cap > 0:
            r = Fraction(per_resource[res] * 1000, cap)
            if r > ratio:
                ratio, dominant = r, res
    return DRS(weight, ratio, dominant, frozenset(borrowed))


class Shares:
    """Share calculator for one snapshot; caches weights and lendable capacity (quota only)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._weights: dict[int, Fraction] = {}
        self._lendable: dict[int, dict[str, int]] = {}

    def weight(self, node: QuotaNode) -> Fraction:
        w = self._weights.get(id(node))
        if w is None:
            item = self.snapshot.owner(node)
            spec = item.spec
            w = parse_weight(spec.fair_sharing if spec is not None else None)
            self._weights[id(node)] = w
        return w

    def lendable(self, node: QuotaNode) -> dict[str, int]:
        cap = self._lendable.get(id(node))
        if cap is None:
            cap = self._lendable[id(node)] = lendable(node)
        return cap

    def of(self, node: QuotaNode, extra: Mapping[FR, int] | None = None) -> DRS:
        if node.parent is None:
            return DRS(self.weight(node))
        return dominant_resource_share(node, self.weight(node), extra=extra,
                                       lendable_of_parent=self.lendable(node.parent))
