"""Running the tasks of a multi-party protocol (FSIR's clients, a vertical protocol's parties): in process, on any
``concurrent.futures.Executor``, or on Dask. Shared by ``privsdr.federated`` and ``privsdr.vertical``.

Each client or party draws its noise from its own child of one ``SeedSequence`` (``spawn``), so results do
not depend on the scheduler. On Dask the tasks are submitted with ``pure=False``: otherwise Dask
would recognise identical calls and reuse one noisy result for several clients.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any

import numpy as np


def client_seeds(random_state: Any, count: int) -> list[np.random.SeedSequence]:
    """``count`` independent child seeds of ``random_state`` (an int, a SeedSequence or a Generator), one per task."""
    if isinstance(random_state, np.random.SeedSequence):
        root = random_state
    elif isinstance(random_state, np.random.Generator):
        root = np.random.SeedSequence(random_state.integers(0, 2**63, size=4).tolist())
    else:
        root = np.random.SeedSequence(random_state)
    return root.spawn(count)


def run_clients(fn: Callable[..., Any], tasks: Sequence[dict[str, Any]], executor: Executor | Any | None = None) -> list[Any]:
    """``[fn(**task) for task in tasks]`` in order, on ``executor`` (None: in process; a Dask
    ``distributed.Client``: submitted with pure=False; anything with ``submit``: a futures executor)."""
    if executor is None:
        return [fn(**task) for task in tasks]
    if _is_dask_client(executor):
        client: Any = executor  # a distributed.Client (dask is optional: no import, no type)
        futures = [client.submit(fn, pure=False, **task) for task in tasks]
        return client.gather(futures)
    if isinstance(executor, Executor) or hasattr(executor, "submit"):
        futures = [executor.submit(fn, **task) for task in tasks]
        return [f.result() for f in futures]
    raise TypeError(f"executor must be None, a concurrent.futures.Executor or a dask.distributed.Client, got {type(executor).__name__}")


def _is_dask_client(obj: Any) -> bool:
    return type(obj).__module__.startswith("distributed") and hasattr(obj, "gather")
