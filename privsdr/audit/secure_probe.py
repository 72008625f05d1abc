"""The secure paths' party program, run in this process: what a secure opening sums, without MPC processes.

``run_in_process(job, inputs)`` stands in for ``secure.launch.run_parties`` (and ``InProcessParties`` for the agreed
parties of ``secure.aggregate.start_parties``; ``in_process`` installs both): every party's input is made by the party
program's own functions, as its process makes it (``secure.party.party_statistics``: clipped statistics rounded to the
grid, or a secure Gram's blocks, computed and checked once before the charge; then ``with_shares``: its noise shares),
and the party program's computation (``secure.party._aggregate``: the sum of the
contributors' vectors and the cross-products of the blocks) runs once on plain integers through a stand-in for MPyC's
runtime that holds every party's input. What it opens is what the real run opens, with the same noise shares.

Two probes use it (``docs/audit.md``, "Probes of the secure paths"):

* **sensitivity**: with every share drawn as 0 (``share=zero_shares``) the opening is the noise-free sum the parties
  secret-share; on neighbouring data sets its change must stay within each node's declared sensitivity
  (``probe_sensitivity``), whatever the clipping, rounding and layout code does on the way;
* **contributors** (``share_counts``): every share a party draws is a marker B^i of its index i, so the opening's
  noise tells, per coordinate, how many shares of each party it holds. An opening must hold exactly one share of each
  of the K parties the calibration counted (K - t of them honest), never fewer.

The stand-in runs the parties' arithmetic exactly (Python integers); it does not model the network or the Shamir
shares (the view tests with real MPyC processes do that). It does check the one condition under which MPyC's opening
equals that integer sum: every opened value lies within +-2^(bits - 1) of the job's secure integers (``secure.job``:
the field has more than 2^(bits + 30) elements); an opening beyond it raises ``FieldOverflow``, where the real parties
would open it wrapped around the field.
"""
from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..mechanisms import NoiseSpec, Sensitivity
from ..mechanisms import secure as exact
from ..mechanisms.distributed import share_noise
from ..secure import party as program
from ..secure.job import AggregationJob
from ..secure.launch import Opened, PartyFailed

#: a share function: party index -> the value each of its noise-share draws returns
Shares = Callable[[int], int]


class FieldOverflow(AssertionError):
    """An opened value beyond +-2^(bits - 1): the job's field is too small for the sum (MPyC would open it wrapped)."""


def opened_sensitivity(spec: NoiseSpec) -> Sensitivity:
    """What a distributed node's calibration assumes of its opening, in real units: the rounded statistic moves by at
    most (Delta / gamma + ceil(sqrt(d))) grid steps (``mechanisms.distributed.share_noise``), i.e. Delta plus the
    rounding's ceil(sqrt(d)) gamma. The sensitivity probe compares the noise-free opening with this."""
    noise = share_noise(spec)
    return Sensitivity(noise.grid_sensitivity * noise.gamma, "l2", spec.sensitivity.relation,
                       f"{spec.sensitivity.derivation}; plus the rounding to the grid {noise.gamma:g}")


def zero_shares(index: int) -> int:
    """Every share drawn as 0: the opening is the noise-free sum the parties secret-share."""
    return 0


class _SecureType:
    def __init__(self, bits: int) -> None:
        self.bits = bits

    def array(self, value: Any) -> np.ndarray:
        return np.array(np.asarray(value), dtype=object)


class _Runtime:
    """The part of MPyC's runtime the party program uses, on plain integers: ``input`` hands every sender's actual
    input (the table), ``output`` opens the value as is."""

    def __init__(self, job: AggregationJob, pid: int, table: Mapping[str, tuple[Any, Any]]) -> None:
        self.job, self.pid, self.table = job, pid, table
        self.parties: list[Any] = []  # no peers: nothing is sent
        groups = job.products.groups if job.products is not None else ()
        # a party's column groups, in the order the party program secret-shares them (``party._cross_products``)
        self._groups = {name: itertools.cycle([g.name for g in groups if g.owner == name] or [""]) for name in job.parties}
        self._offset = {g.name: 0 for g in groups}  # the rows of each group already input (chunk by chunk)

    async def start(self) -> None:
        return None

    async def shutdown(self) -> None:
        return None

    async def barrier(self, name: str | None = None) -> None:
        return None

    def SecInt(self, bits: int) -> _SecureType:  # noqa: N802 - MPyC's name
        return _SecureType(bits)

    def input(self, value: np.ndarray, senders: Any) -> Any:
        if isinstance(senders, (int, np.integer)):  # one of that party's column groups, in layout order, chunk by chunk
            name = self.job.parties[int(senders)]
            held = self.table[name][1]
            group, rows = next(self._groups[name]), np.shape(value)[0]
            start = self._offset[group]
            self._offset[group] = start + rows
            return np.array(np.zeros(np.shape(value), dtype=np.int64) if held is None else held[group][start:start + rows], dtype=object)
        out = []
        for s in senders:
            vector = self.table[self.job.parties[int(s)]][0]
            out.append(np.array(np.zeros(np.shape(value), dtype=np.int64) if vector is None else vector, dtype=object))
        return out

    async def output(self, value: Any) -> Any:
        limit = 2 ** (self.job.bits - 1)
        beyond = [int(v) for v in np.asarray(value, dtype=object).ravel() if not -limit < int(v) < limit]
        if beyond:
            raise FieldOverflow(f"{len(beyond)} opened value(s) beyond +-2^{self.job.bits - 1} (e.g. {beyond[0]}): the job's "
                                f"{self.job.bits}-bit secure integers cannot hold the sum, the parties would open it wrapped")
        return value

    async def gather(self, value: Any) -> Any:
        raise NotImplementedError("the in-process stand-in does not model the parties' views (use the MPyC runs)")


@contextmanager
def _drawn_as(value: int) -> Iterator[None]:
    original = exact._discrete_gaussian
    exact._discrete_gaussian = lambda num, den: value
    try:
        yield
    finally:
        exact._discrete_gaussian = original


def party_statistics(job: AggregationJob, inputs: Mapping[str, Mapping[str, Any] | None]) -> dict[str, tuple[Any, Any]]:
    """What every party computes from its input before the agreement, as the party program does
    (``secure.party.party_statistics``: checked, on the grid, no noise yet). A party that refuses raises
    ``PartyFailed`` naming it (before anything is charged)."""
    table = {}
    for name in job.parties:
        try:
            table[name] = program.party_statistics(job, name, {k: np.asarray(v) for k, v in dict(inputs.get(name) or {}).items()})
        except program.ShareRefused as exc:
            raise PartyFailed(f"party {name!r} refused: {exc}", name) from None
    return table


def party_inputs(job: AggregationJob, inputs: Mapping[str, Mapping[str, Any]], share: Shares | None = None,
                 statistics: Mapping[str, tuple[Any, Any]] | None = None) -> dict[str, tuple[Any, Any]]:
    """Every party's input as the party program makes it after the charge: its statistics (``party_statistics``, or
    ``statistics`` already computed) plus its noise shares (``secure.party.with_shares``); ``share(i)``: the value of
    each share draw of party i (None: the real sampler). A party that refuses raises ``PartyFailed`` naming it."""
    statistics = party_statistics(job, inputs) if statistics is None else statistics
    table = {}
    for i, name in enumerate(job.parties):
        q, held = statistics[name]
        try:
            if q is not None:
                with (contextlib.nullcontext() if share is None else _drawn_as(share(i))):
                    q = program.with_shares(job, q)
        except program.ShareRefused as exc:
            raise PartyFailed(f"party {name!r} refused: {exc}", name) from None
        table[name] = (q, held)
    return table


def check_inputs(job: AggregationJob, inputs: Mapping[str, Mapping[str, Any] | None]) -> None:
    """Every party checks its own input, as the party processes do before the agreement: a refusal raises
    ``PartyFailed`` naming the party (before anything is charged)."""
    party_statistics(job, inputs)


def run_in_process(job: AggregationJob, inputs: Mapping[str, Mapping[str, Any]], *, charge: Callable[[], None] | None = None,
                   record_view: bool = False, share: Shares | None = None, certificates: Any = None) -> Opened:
    """``launch.run_parties`` in this process (module docstring): the opened integer sum. In the same order as the
    party processes: every party computes and checks its statistics (a refusal raises before ``charge``), ``charge()``,
    then each adds its shares. ``certificates`` is accepted and unused: one process has no channels."""
    if record_view:
        raise ValueError("the in-process stand-in records no views")
    statistics = party_statistics(job, inputs)
    if charge is not None:
        charge()
    table = party_inputs(job, inputs, share, statistics)
    vector, held = table[job.parties[0]]
    opened, _, _ = asyncio.run(program._aggregate(_Runtime(job, 0, table), job, vector, False, None, held))
    return Opened(np.asarray(opened, dtype=np.int64), {}, 0.0, {name: 0 for name in job.parties})


def share_counts(job: AggregationJob, inputs: Mapping[str, Mapping[str, Any]]) -> np.ndarray:
    """(parties x coordinates): how many noise shares of each party the opening holds, read off marked shares (each
    draw of party i is B^i with B = 2 m + 1, m parties; the counts are the base-B digits of the opened noise, -m..m)."""
    m = len(job.parties)
    base = 2 * m + 1
    clean = run_in_process(job, inputs, share=zero_shares).aggregate.astype(object)
    noise = run_in_process(job, inputs, share=lambda i: base**i).aggregate.astype(object) - clean
    counts = np.zeros((m, noise.size), dtype=np.int64)
    for c, value in enumerate(noise):
        rest = int(value)
        for i in range(m):  # balanced base-B digits: a digit in -m..m
            digit = (rest + m) % base - m
            counts[i, c] = digit
            rest = (rest - digit) // base
        if rest != 0:
            counts[:, c] = base  # more shares than the digits can hold: certainly not one per party
    return counts


class InProcessParties:
    """Stands in for ``secure.launch.Parties`` (started, agreed, then ``finish``): the agreement checks every party's
    input as the party processes do (a refusal raises ``PartyFailed`` before any charge), ``finish(charge)`` runs
    ``runner`` (``run_in_process`` or a test's recording wrapper of it)."""

    def __init__(self, job: AggregationJob, inputs: Mapping[str, Mapping[str, Any] | None], runner: Callable[..., Opened], *,
                 certificates: Any = None, record_view: bool = False) -> None:
        self.job, self._inputs, self._runner, self._record_view = job, inputs, runner, record_view
        self.charged = False

    def __enter__(self) -> InProcessParties:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def agree(self) -> None:
        check_inputs(self.job, self._inputs)

    def finish(self, charge: Callable[[], None] | None = None) -> Opened:
        self.charged = True
        return self._runner(self.job, self._inputs, charge=charge, record_view=self._record_view)


def in_process(setattr_: Callable[[Any, str, Any], None], runner: Callable[..., Opened]) -> None:
    """Make every secure release of ``privsdr.secure.aggregate`` run ``runner`` in this process, on both paths (the
    one-call ``run_parties`` and the agreed ``start_parties``); ``setattr_``: e.g. pytest's ``monkeypatch.setattr``."""
    from ..secure import aggregate

    setattr_(aggregate, "run_parties", runner)
    setattr_(aggregate, "start_parties",
             lambda job, inputs, *, certificates=None, record_view=False: InProcessParties(job, inputs, runner,
                                                                                          certificates=certificates,
                                                                                          record_view=record_view))
