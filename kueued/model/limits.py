"""Limits kueued sets where Kubernetes, Kueue and Koordinator set none, and why.

A user-controlled shape must never decide how deep kueued's own call stacks go or how long
it works on one object.  Each limit here sits far above any real cluster (Kueue's and
Koordinator's users build trees of a handful of levels) and far below what would hurt, and
crossing it is reported with the limit's name and value, never a ``RecursionError``.
"""

from __future__ import annotations

__all__ = ["MAX_TREE_DEPTH"]

MAX_TREE_DEPTH = 64
"""Levels a quota tree may have: Cohorts above a ClusterQueue, or ElasticQuota groups above a
leaf (the root counts as level 1).  A Cohort deeper than this is inactive, with every queue
below it (as a cycle makes it); an ElasticQuota that would be deeper is refused."""
