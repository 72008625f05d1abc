"""Released statistics: the one object every release path produces.

Most estimators here are post-processing of a few noisy sufficient statistics (DPSIR's moments, DPPLS's X^T X and
X^T y, the secure regressions' Gram). Those statistics can be released in memory, over row chunks, on Dask, as a
secure aggregate of several parties (``privsdr.secure``) or as securely computed cross-products of vertically
partitioned parties; whatever the path, it produces a ``Released``: the named noisy arrays, the public standard
deviation of each array's noise, the number of rows, the relation, each array's grid step when the noise was
discrete, the plan nodes they came from, the plan's hash and the path. An estimator's post-processing reads a
``Released`` and nothing else, so a new path is one producer, not a copy of each estimator.

``Released`` round-trips through ``to_dict``/``from_dict`` (arrays as nested lists): a release can be stored,
sent to another party or re-analysed later without touching the data again.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from ..mechanisms.distributed import SAMPLER, share_noise
from ..plan import Run

FORMAT = "privsdr.released"


def _arrays(value: Mapping[str, Any]) -> dict[str, np.ndarray]:
    return {str(k): np.asarray(v, dtype=float) for k, v in value.items()}


def _floats(value: Mapping[str, Any] | None) -> dict[str, float]:
    return {str(k): float(v) for k, v in (value or {}).items()}


@attrs.frozen(eq=False)
class Released:
    """Named noisy statistics and what post-processing may know about their noise (module docstring)."""

    arrays: Mapping[str, np.ndarray] = attrs.field(converter=_arrays)
    scales: Mapping[str, float] = attrs.field(converter=_floats)  #: public noise sd of each array (real units)
    n: int  #: the number of rows when it is public (replace-one); 0 under add/remove, where it is not
    relation: str
    source: str  #: "in memory", "chunks", "dask", "secure aggregation", ...
    nodes: Mapping[str, str] = attrs.field(factory=dict, converter=lambda v: {str(k): str(x) for k, x in dict(v).items()})  #: array -> node
    grid: Mapping[str, float] = attrs.field(factory=dict, converter=_floats)  #: array name -> grid step (discrete noise)
    plan_hash: str = ""

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "arrays": {k: v.tolist() for k, v in self.arrays.items()}, "scales": dict(self.scales),
                "n": int(self.n), "relation": self.relation, "source": self.source, "nodes": dict(self.nodes),
                "grid": dict(self.grid), "plan_hash": self.plan_hash}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Released:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a privsdr release (format {data.get('format')!r})")
        return cls(data["arrays"], data["scales"], int(data["n"]), data["relation"], data["source"], data.get("nodes", {}),
                   data.get("grid", {}), data.get("plan_hash", ""))


def noise_sd(run: Run, node: str) -> float:
    """The public standard deviation of a node's noise as released (a distributed node: every party's share)."""
    spec = run.runtime_specs.get(node, run.plan.specs[node])
    if spec.sampler == SAMPLER:
        return 0.0 if spec.noise_off else share_noise(spec).opened_sd
    return float(spec.scale)


def grid_step(run: Run, node: str) -> float | None:
    spec = run.plan.specs[node]
    if spec.sampler == SAMPLER:
        return share_noise(spec).gamma
    return None


def from_run(run: Run, names: Mapping[str, str] | Sequence[str], *, n: int, source: str) -> Released:
    """The released outputs of ``run`` (``names``: array name -> node, or node names used as array names)."""
    mapping = dict(names) if isinstance(names, Mapping) else {name: name for name in names}
    grid = {k: g for k, node in mapping.items() if (g := grid_step(run, node)) is not None}
    return Released({k: run.outputs[node] for k, node in mapping.items()}, {k: noise_sd(run, node) for k, node in mapping.items()},
                    int(n), run.plan.relation.value, source, mapping, grid, run.plan.plan.plan_hash())
