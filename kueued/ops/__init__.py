"""The operator's CLI: ``kueued status``, ``kueued explain``, ``kueued simulate --from-cluster``.

Each command answers from a World, built either from manifest files (run to quiescence
first, as ``kueued simulate`` does) or from a live cluster's objects (read once, never
scheduled, never written).  The same quota forest the engine uses turns that World into
balances (:mod:`.tree`); :mod:`.status`, :mod:`.explain` and :mod:`.from_cluster` read them.

    files ──► World ──► engine to quiescence ──┐
                                               ├──► tree.settle(world) ──► status / explain / what-if
    cluster ──► cluster_read.snapshot ──► World ┘

This package sits at the CLI's level: it may import the engine (through ``kueued.simulate``)
and ``kueued.kube``; nothing below imports it.  The actor engine is handed in as a
``runner`` by ``kueued.cli``, the composition root, so nothing here imports ``actors``.
"""
