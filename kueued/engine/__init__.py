"""Orchestration above the pure decision code: which preemptor and order a World's settings
call for (:mod:`.wiring`) and the synchronous engine that runs cycles without actors
(:mod:`.sync`, the reference the actor engine is checked against until one engine remains).

It sits above ``kueued.scheduling`` (pure: no I/O, nothing from above) and beside the World it
reads; ``actors`` and ``simulate`` build on it.
"""
