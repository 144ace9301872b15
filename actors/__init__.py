"""kueued's engine as actors: a Cohort or ClusterQueue each, and the coordinator that commits."""

import kueued  # noqa: F401  (decides where the compiled modules load from: kueued/native.py)
