"""What a protocol calls: release some plan nodes as secure aggregates of the parties' statistics.

``secure_release(run, names, contributions, ...)``:

1. builds the public job from the nodes' calibrated specs (``distributed_gaussian`` / ``distributed_symmetric_gaussian``:
   grid, share variance) and the public per-node bounds, which sizes the field (``job.field_bits``);
2. charges every node (``Run.issue``: write-ahead, before any party draws a share or anything is opened);
3. runs one process per party on 127.0.0.1 (``launch.run_parties``); each contributor rounds its statistics to the
   grid and adds its own noise share; only the sum is opened;
4. records the opened sums, back in real units, as the nodes' outputs (``Run.accept``) and the trust model on the
   run's report.

A party that fails, refuses or times out raises ``SecureAggregationError`` naming it; the nodes stay charged (the
journal says so), nothing else is released, and every party process has been ended.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import attrs
import numpy as np

from ..errors import PrivsdrError, ValidationError
from ..mechanisms.distributed import SAMPLER, from_upper_triangle, share_noise
from ..plan import Run, tap
from .job import AggregationJob, NodeJob
from .launch import Opened, PartyFailed, run_parties
from .trust import trust_model

SYMMETRIC = "distributed_symmetric_gaussian"


class SecureAggregationError(PrivsdrError, RuntimeError):
    """The secure aggregation did not complete: ``party`` names the party that failed (None if unknown). The nodes
    charged before the parties started stay charged; ``pids`` are the party processes, all ended."""

    def __init__(self, message: str, party: str | None = None, pids: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.party = party
        self.pids = pids


@attrs.frozen(eq=False)
class SecureRelease:
    """The released values (real units) by node, and what the run cost in time and traffic."""

    values: Mapping[str, np.ndarray]
    job: AggregationJob
    opened: Opened


def node_job(run: Run, name: str, bound: float) -> NodeJob:
    """The public description of node ``name`` for the parties (from its calibrated spec)."""
    spec = run.plan.specs[name]
    if spec.sampler != SAMPLER:
        raise ValidationError(f"node {name!r} is not a distributed release (mechanism {spec.mechanism!r})")
    noise = share_noise(spec)
    variance = Fraction(0) if spec.noise_off else noise.sigma_local2
    d = int(spec.params["dimension"])
    square = None
    if spec.mechanism == SYMMETRIC:
        p = int(round((np.sqrt(8 * d + 1) - 1) / 2))
        square = p
    return NodeJob(name, d, noise.gamma, (variance.numerator, variance.denominator), float(bound), square)


def build_job(run: Run, names: Sequence[str], bounds: Mapping[str, float], *, parties: Sequence[str], contributors: Sequence[str],
              threshold: int, timeout: float) -> AggregationJob:
    """The job of releasing ``names`` (checked: every node's share count matches the contributors and t)."""
    for name in names:
        spec = run.plan.specs[name]
        if spec.sampler != SAMPLER:
            raise ValidationError(f"node {name!r} is not a distributed release")
        if int(spec.params["parties"]) != len(contributors) or int(spec.params["colluders"]) != threshold:
            raise ValidationError(f"node {name!r} was calibrated for {spec.params['parties']} noise shares and "
                                  f"{spec.params['colluders']} colluders, not {len(contributors)} and {threshold}")
    return AggregationJob(parties, contributors, threshold, tuple(node_job(run, n, bounds[n]) for n in names), timeout)


def secure_release(run: Run, names: Sequence[str], contributions: Mapping[str, Mapping[str, Any]], bounds: Mapping[str, float], *,
                   parties: Sequence[str], threshold: int, timeout: float = 60.0, server: str | None = None,
                   record_view: bool = False) -> SecureRelease:
    """Release ``names`` as secure aggregates of ``contributions[party][node]`` (module docstring). ``parties``: every
    MPyC party in order (the contributors and, e.g., a server that contributes nothing)."""
    contributors = [p for p in parties if p in contributions]
    job = build_job(run, names, bounds, parties=parties, contributors=contributors, threshold=threshold, timeout=timeout)
    run.issue(*names)  # write-ahead: every node charged before any share exists
    try:
        opened = run_parties(job, contributions, record_view=record_view)
    except PartyFailed as exc:
        raise SecureAggregationError(str(exc), exc.party, exc.pids) from None
    values: dict[str, np.ndarray] = {}
    at = 0
    for node in job.nodes:
        chunk = opened.aggregate[at:at + node.dimension].astype(float) * node.gamma
        at += node.dimension
        value = from_upper_triangle(chunk, node.square) if node.square is not None else chunk
        # the replay audit's tap sees the noise-free sum (known here only because this process holds every contribution)
        plain = sum(np.asarray(c[node.name], dtype=float) for c in contributions.values())
        value = tap.release_seen((run.algorithm, node.name), np.asarray(plain).reshape(np.shape(value)) if node.square is None
                                 else plain, value, run.plan.specs[node.name])
        values[node.name] = value
        run.accept(node.name, value, run.plan.specs[node.name])
    run.trust_model = trust_model(job, server)
    return SecureRelease(values, job, opened)
