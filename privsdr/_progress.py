"""Progress bars for long loops: a tqdm bar on a terminal, silence when piped or without tqdm."""
from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], total: int | None = None, desc: str = "", min_total: int = 1_000) -> Iterator[T]:
    """Wrap ``items`` in a progress bar when stderr is a terminal and the loop is long enough."""
    if total is not None and total < min_total or not sys.stderr.isatty():
        yield from items
        return
    try:
        from tqdm import tqdm
    except ImportError:
        yield from items
        return
    yield from tqdm(items, total=total, desc=desc, leave=False, file=sys.stderr)
