"""The actors' exceptions.

In a module of their own because :mod:`actors.runtime` is compiled (``kueued/native.py``), and
mypyc's classes cannot derive from ``RuntimeError``.
"""

from __future__ import annotations

__all__ = ["ActorStopped"]


class ActorStopped(RuntimeError):
    """The actor stopped before it could answer."""
