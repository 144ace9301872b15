"""Quantities are bounded as Kubernetes bounds them: capped at the largest int64, rounded to a
nano-unit, and a hostile exponent costs nothing."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kueued.model.quantity import MAX_VALUE, QuantityError, exact, parse
from kueued.world import World
from tests.builders import cluster_queue, flavor, quotas
from tests.elastic.builders import EQ


@pytest.mark.timeout(10)  # a hang guard, not a timing: before the bound these took minutes
@pytest.mark.parametrize("text, value", [
    pytest.param("1e100000000", Fraction(MAX_VALUE), id="huge-exponent"),
    pytest.param("-1e100000000", -Fraction(MAX_VALUE), id="huge-negative"),
    pytest.param("1e-100000000", Fraction(1, 10**9), id="tiny-rounds-up-to-a-nano"),
    pytest.param("12345678901234567890", Fraction(MAX_VALUE), id="above-int64"),
    pytest.param("8Ei", Fraction(MAX_VALUE), id="binary-above-int64"),
    pytest.param("1.5k", Fraction(1500), id="plain"),
    pytest.param("0.1n", Fraction(1, 10**9), id="sub-nano"),
    pytest.param("-0.1n", Fraction(-1, 10**9), id="sub-nano-negative"),
])
def test_values_are_capped_and_rounded_as_kubernetes_does(text: str, value: Fraction) -> None:
    assert exact(text) == value
    assert parse(text) == -((-value.numerator * 1000) // value.denominator)


@pytest.mark.parametrize("text, why", [
    pytest.param("1" * 65, "at most 64 significant digits", id="digits"),
    pytest.param("1e" + "9" * 19, "exponent", id="exponent"),
    pytest.param("1e3k", "must match", id="exponent-and-suffix"),
    pytest.param("nan", "must match", id="nan"),
])
def test_what_cannot_be_bounded_is_refused(text: str, why: str) -> None:
    with pytest.raises(QuantityError, match=why):
        parse(text)


@pytest.mark.timeout(10)
def test_a_hostile_quantity_in_any_kind_is_capped_or_refused_with_its_field_path() -> None:
    world = World()
    world.apply(flavor("default"))
    world.apply(cluster_queue("big", quotas("default", cpu="1e100000000")))
    assert "ClusterQueue/big" not in world.rejected  # capped at the int64 maximum, as Kueue reads it
    world.apply(cluster_queue("bad", quotas("default", cpu="1" * 80)))
    assert world.rejected["ClusterQueue/bad"].startswith(
        "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value")
    assert "at most 64 significant digits" in world.rejected["ClusterQueue/bad"]
    world.apply(EQ("team").min(cpu="1e99999999").max(cpu="1e" + "9" * 30).build())
    assert "spec.max.cpu" in next(v for k, v in world.rejected.items() if k.startswith("ElasticQuota/"))
