"""Preemption: which admitted workloads to evict so a pending one fits.

``classical`` is Kueue's search when fair sharing is off (withinClusterQueue,
reclaimWithinCohort, borrowWithinCohort / KEP-1337, hierarchical reclaim across
multi-level cohort trees).  The pieces a fair-sharing search reuses live apart:
``policy`` (SatisfiesPreemptionPolicy and the KEP-1337 threshold), ``ordering``
(CandidatesOrdering as a sort key) and ``minimal`` (remove-until-fits and fill-back
on a snapshot).  ``candidates`` holds the hierarchical collection and classification
used by the classical search.
"""

from kueued.scheduling.preemption.classical import ClassicalPreemptor, classical_targets
from kueued.scheduling.preemption.minimal import fill_back, minimal_targets, restore, workload_fits
from kueued.scheduling.preemption.ordering import candidate_order_key, compare_candidates, is_evicted
from kueued.scheduling.preemption.policy import satisfies_preemption_policy

__all__ = ["ClassicalPreemptor", "classical_targets", "fill_back", "minimal_targets", "restore",
           "workload_fits", "candidate_order_key", "compare_candidates", "is_evicted",
           "satisfies_preemption_policy"]
