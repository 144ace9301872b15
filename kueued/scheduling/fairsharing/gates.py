"""Feature gates the scheduler reads (fair sharing, the cycle, the World), with Kueue's
defaults, and the cycle's settings.

``Settings.feature_gates`` holds only what a Configuration spelled out; everything
else takes Kueue's default (``pkg/features/kube_features.go``).

The admission order (:func:`~kueued.scheduling.fairsharing.ordering.fair_order`) is
called with the cycle's entries and snapshot only, but two of its rules are gated.
The snapshot carries the run's settings (``Snapshot.settings``), so the order reads
them from there.
"""

from __future__ import annotations

from kueued.model.settings import Settings
from kueued.scheduling.snapshot import Snapshot

__all__ = ["DEFAULTS", "enabled", "remember_settings", "settings_of"]

DEFAULTS: dict[str, bool] = {
    "AdmissionFairSharing": True,                       # beta since 0.15
    "FairSharingPreemptWithinNominal": True,            # beta since 0.17
    "FairSharingPrioritizeNonBorrowing": True,          # beta since 0.17
    "FairSharingReevaluatePreemptionCandidates": False,  # alpha
    "PartialAdmission": True,                           # beta (read by the cycle, kueued.scheduling.partial)
    "PrioritizePreemptorWorkloads": True,               # alpha in Kueue; on here (no flopping)
    "PrioritySortingWithinCohort": True,
    "ReclaimablePods": True,                            # beta (read by the World, kueued.scheduling.workload)
}


def enabled(settings: Settings | None, gate: str) -> bool:
    if settings is not None and gate in settings.feature_gates:
        return bool(settings.feature_gates[gate])
    return DEFAULTS.get(gate, False)


def remember_settings(snapshot: Snapshot, settings: Settings) -> None:
    snapshot.settings = settings


def settings_of(snapshot: Snapshot) -> Settings | None:
    return snapshot.settings
