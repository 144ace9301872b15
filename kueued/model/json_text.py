"""JSON text that users write inside annotations, read without trusting it.

Koordinator's annotations (shared weight, namespaces, strict max keys, runtime) and kueued's
own Job annotation hold JSON.  Go's ``encoding/json`` reads any nesting a manifest can carry;
a Python decoder recurses, and a value nested a thousand levels deep raised ``RecursionError``,
which is no ``ValueError`` and so escaped every caller's "unreadable" branch: one annotation
took the daemon down, and down again on every restart while the object existed.
"""

from __future__ import annotations

import msgspec

__all__ = ["read_json"]


def read_json(text: str | bytes) -> object:
    """The value ``text`` holds; ``ValueError`` (with why) for anything unreadable, nesting too
    deep for the decoder included."""
    try:
        return msgspec.json.decode(text)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply to read") from exc
