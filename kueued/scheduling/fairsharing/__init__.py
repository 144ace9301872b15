"""Fair sharing: Kueue's preemption-based fair sharing and admission fair sharing.

* ``share``: dominant resource share of a cohort-tree node, weights, comparison.
* ``ordering``: the admission tournament (:func:`fair_order`, the cycle's ``iterate``)
  and the order in which preemption visits ClusterQueues.
* ``preemption``: :class:`FairPreemptor`, the cycle's preemptor when the Configuration
  sets ``fairSharing`` (strategies LessThanOrEqualToFinalShare / LessThanInitialShare).
* ``admission``: KEP-4136 admission fair sharing, LocalQueue usage with decay and
  entry penalties; each engine owns an :class:`AdmissionFairSharing` that orders its
  pending queues and its fair-sharing preemptor's candidates.
* ``gates``: the feature gates these read, with Kueue's defaults.

The classical candidate order, preemption policies and fill-back are shared with
``kueued.scheduling.preemption``.
"""

from kueued.scheduling.fairsharing.admission import AdmissionFairSharing, UsageLedger, afs_enabled, alpha
from kueued.scheduling.fairsharing.ordering import TargetOrdering, fair_order
from kueued.scheduling.fairsharing.preemption import FairPreemptor, fair_targets
from kueued.scheduling.fairsharing.share import DRS, Shares, compare, dominant_resource_share

__all__ = ["FairPreemptor", "fair_targets", "fair_order", "TargetOrdering", "DRS", "Shares", "compare",
           "dominant_resource_share", "AdmissionFairSharing", "UsageLedger", "alpha", "afs_enabled"]
