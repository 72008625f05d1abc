"""JSON documents read from users' files (model files, reports, configurations, bounds): ``json.loads`` that refuses a
document nested deeper than any privsdr file is, as a ``json.JSONDecodeError`` (so every reader's "not a ... file"
message covers it), instead of a ``RecursionError`` from the parser or from the recursive readers after it.

Beside the layers (like ``privsdr._io``): it imports nothing of privsdr, so the report layer may use it.
"""
from __future__ import annotations

import json
from typing import Any

#: the deepest nesting accepted: a privsdr file nests about ten levels (a Pipeline's step -> report -> node ->
#: sensitivity), and the readers after the parser recurse once per level (far below the interpreter's limit here)
MAX_DEPTH = 100


def _too_deep(document: Any) -> bool:
    """Whether ``document`` nests lists/objects more than ``MAX_DEPTH`` levels (iterative: no recursion)."""
    stack = [(document, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if level > MAX_DEPTH:
            return True
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return False


def parse_json(text: str) -> Any:
    """``json.loads(text)``; a document nested more than ``MAX_DEPTH`` levels raises ``json.JSONDecodeError`` (a
    ``ValueError``) saying so, as a malformed one does."""
    try:
        document = json.loads(text)
    except RecursionError:
        document = None
    else:
        if not isinstance(document, (dict, list)) or not _too_deep(document):
            return document
    raise json.JSONDecodeError(f"nested more than {MAX_DEPTH} levels deep", text, 0) from None
