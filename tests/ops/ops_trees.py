"""Small quota trees whose numbers are worked out by hand in the tests that use them."""

from __future__ import annotations

from typing import Any

from tests.builders import cluster_queue, cohort, flavor, local_queue, namespace, quotas, workload

GPU = "nvidia.com/gpu"


def two_levels() -> list[dict[str, Any]]:
    """Cohort org > (Cohort research > vision, nlp), ops; a100 GPUs.

    vision (10, borrowingLimit 6) admits w1 8, w2 4, w3 4 = 16, borrowing 6: nlp's idle 4
    and, through research (14 quota, 16 used: borrowing 2), 2 of ops' idle 6.  w4 (2)
    would take vision to 18, above its 16: it waits.
    """
    return [
        namespace("ns"), flavor("a100"),
        cohort("org"), cohort("research", parent="org"),
        cluster_queue("vision", quotas("a100", **{GPU: ("10", "6")}), cohort="research"),
        cluster_queue("nlp", quotas("a100", **{GPU: "4"}), cohort="research"),
        cluster_queue("ops", quotas("a100", **{GPU: "6"}), cohort="org"),
        local_queue("lq", "ns", "vision"),
        workload("w1", "ns", "lq", created=1, **{GPU: "8"}),
        workload("w2", "ns", "lq", created=2, **{GPU: "4"}),
        workload("w3", "ns", "lq", created=3, **{GPU: "4"}),
        workload("w4", "ns", "lq", created=4, **{GPU: "2"}),
    ]


def one_cohort(*, vision: str = "10") -> list[dict[str, Any]]:
    """Cohort research (implicit) > vision (10, no borrowingLimit), nlp (4): 14 in all.

    w1 8 and w2 4 are admitted (12, vision borrowing 2 of nlp's 4); w3 (4) would take the
    cohort to 16, above its 14: it waits at the cohort.
    """
    return [
        namespace("ns"), flavor("a100"),
        cluster_queue("vision", quotas("a100", **{GPU: vision}), cohort="research"),
        cluster_queue("nlp", quotas("a100", **{GPU: "4"}), cohort="research"),
        local_queue("lq", "ns", "vision"),
        workload("w1", "ns", "lq", created=1, **{GPU: "8"}),
        workload("w2", "ns", "lq", created=2, **{GPU: "4"}),
        workload("w3", "ns", "lq", created=3, **{GPU: "4"}),
    ]
