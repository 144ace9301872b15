"""kueued: a hierarchical quota scheduler daemon for Kubernetes batch workloads."""

from kueued import native

native.install()  # before anything imports a compiled module: see kueued/native.py
