"""What a protocol calls: release some plan nodes as secure aggregates of the parties' statistics.

``secure_release(run, names, contributions, ...)``:

1. builds the public job from the nodes' calibrated specs (``distributed_gaussian`` / ``distributed_symmetric_gaussian``:
   grid, share variance), the public per-node bounds, which size the field (``job.field_bits``), and the calibrated
   plan's public record (``public_record``: budget, accountant, relation, sensitivities, noise events);
2. runs one process per party at the job's addresses (default: free ports on 127.0.0.1), over mutual TLS unless
   plaintext was asked for (``launch.run_parties``); the processes first check that every party holds the same
   public job (its digest, over MPyC's channels) and is ready (issue 33);
3. only then charges every node (``Run.issue``: write-ahead, before any party draws a share or anything is opened),
   and lets the processes go on: each contributor rounds its statistics to the grid and adds its own noise share;
   only the sum is opened;
4. records the opened sums, back in real units, as the nodes' outputs (``Run.accept``) and the trust model on the
   run's report.

A party that fails, refuses or times out raises ``SecureAggregationError`` naming it and every party process has
been ended; nothing else is released. Before the agreement nothing is charged (``charged`` False); after it the
nodes stay charged (the journal says so).

Agreement before the run (issue 36): a launcher builds the job from its calibrated plan (``release_job``,
``gram_job``), starts the parties and waits until every one has agreed (``agreed_parties``: every party on this
machine; ``agreed_own_party``: this party only), and only then opens its ``Run`` (the journal's reserve) and passes
the agreed parties as ``session``. A failure before that point leaves every journal byte for byte as it was.
"""
from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any

import attrs
import numpy as np

from ..errors import PrivsdrError, ValidationError
from ..mechanisms.distributed import SAMPLER, from_upper_triangle, share_noise
from ..network.addresses import loopback_addresses
from ..plan import CalibratedPlan, Run, tap
from .crossproducts import CrossProducts
from .job import AggregationJob, NodeJob
from .launch import Interrupted, Opened, Parties, PartyFailed, check_inputs_given, own_party, run_own_party, run_parties
from .trust import trust_model

SYMMETRIC = "distributed_symmetric_gaussian"


class SecureAggregationError(PrivsdrError, RuntimeError):
    """The secure aggregation did not complete: ``party`` names the party that failed (None if unknown). The nodes
    charged before the parties started stay charged; ``pids`` are the party processes, all ended."""

    def __init__(self, message: str, party: str | None = None, pids: tuple[int, ...] = (), charged: bool = True) -> None:
        super().__init__(message)
        self.party = party
        self.pids = pids
        self.charged = charged  #: False: the parties never all agreed, nothing was charged


@attrs.frozen(eq=False)
class SecureRelease:
    """The released values (real units) by node, and what the run cost in time and traffic."""

    values: Mapping[str, np.ndarray]
    job: AggregationJob
    opened: Opened


def public_record(plan: CalibratedPlan) -> dict[str, Any]:
    """Every public number the calibration and the accounting of ``plan`` depend on, for the job's digest: the plan
    (relation, public parameters, nodes, sensitivities, weights), the budget, the accountant, the allocation and every
    node's charged noise events."""
    pricing = plan.pricing
    record = {"plan": plan.plan.public_dict(), "budget": {"epsilon": plan.budget.epsilon, "delta": plan.budget.delta},
              "allocation": plan.allocation, "accountant": str(pricing) if pricing is None or isinstance(pricing, str) else pricing.to_dict(),
              "charges": [c.to_dict() for c in plan.charges()]}
    return dict(json.loads(json.dumps(record, default=str)))  # as the plan's own hash reads it (``Plan.plan_hash``)


def node_job(plan: CalibratedPlan, name: str, bound: float) -> NodeJob:
    """The public description of node ``name`` for the parties (from its calibrated spec)."""
    spec = plan.specs[name]
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


def build_job(plan: CalibratedPlan, names: Sequence[str], bounds: Mapping[str, float], *, parties: Sequence[str],
              contributors: Sequence[str], threshold: int, timeout: float, products: CrossProducts | None = None,
              addresses: Sequence[str] | None = None, tls: bool = True) -> AggregationJob:
    """The job of releasing ``names`` of ``plan`` (checked: every node's share count matches the contributors and t).
    ``addresses``: one host:port per party (default: free ports on 127.0.0.1); ``tls``: False only for plaintext
    asked for explicitly."""
    for name in names:
        spec = plan.specs[name]
        if spec.sampler != SAMPLER:
            raise ValidationError(f"node {name!r} is not a distributed release")
        if int(spec.params["parties"]) != len(contributors) or int(spec.params["colluders"]) != threshold:
            raise ValidationError(f"node {name!r} was calibrated for {spec.params['parties']} noise shares and "
                                  f"{spec.params['colluders']} colluders, not {len(contributors)} and {threshold}")
    nodes = tuple(node_job(plan, n, bounds[n]) for n in names)
    return AggregationJob(parties, contributors, threshold, nodes, timeout, products, public_record(plan),
                          tuple(addresses) if addresses else loopback_addresses(len(parties)), tls)


def release_job(plan: CalibratedPlan, names: Sequence[str], contributors: Sequence[str], bounds: Mapping[str, float], *,
                parties: Sequence[str], threshold: int, timeout: float = 60.0, addresses: Sequence[str] | None = None,
                tls: bool = True) -> AggregationJob:
    """The public job of ``secure_release``: the nodes ``names`` of ``plan``, summed over the ``contributors`` (in
    ``parties`` order; the other parties, e.g. a server, contribute nothing)."""
    return build_job(plan, names, bounds, parties=parties, contributors=[p for p in parties if p in contributors],
                     threshold=threshold, timeout=timeout, addresses=addresses, tls=tls)


def secure_release(run: Run, names: Sequence[str], contributions: Mapping[str, Mapping[str, Any]], bounds: Mapping[str, float], *,
                   parties: Sequence[str], threshold: int, timeout: float = 60.0, server: str | None = None,
                   record_view: bool = False, addresses: Sequence[str] | None = None, tls: bool = True,
                   certificates: Mapping[str, Any] | None = None, session: Parties | None = None,
                   contributors: Sequence[str] | None = None) -> SecureRelease:
    """Release ``names`` as secure aggregates of ``contributions[party][node]`` (module docstring). ``parties``: every
    MPyC party in order (the contributors and, e.g., a server that contributes nothing); ``addresses``, ``tls``,
    ``certificates``: the channels (``build_job``, ``launch.run_parties``). ``session``: the parties, already agreed
    on this job before ``run`` was opened (``agreed_parties``, ``agreed_own_party``; exited here); ``contributors``:
    who contributes when ``contributions`` holds this party's own only (one party's run; default its keys)."""
    job = release_job(run.plan, names, list(contributions) if contributors is None else contributors, bounds, parties=parties,
                      threshold=threshold, timeout=timeout, addresses=addresses, tls=tls)
    whole = set(job.inputs) <= set(contributions)  # this process holds every contribution: the replay audit's tap
    plain: dict[str, np.ndarray] | None = {name: np.sum([np.asarray(c[name], dtype=float) for c in contributions.values()], axis=0)
                                           for name in names} if whole else None
    if session is not None:
        return release_agreed(run, job, session, plain, server)
    return _run(run, job, lambda j, charge: run_parties(j, contributions, charge=charge, record_view=record_view,
                                                        certificates=certificates), plain, server)


def release_agreed(run: Run, job: AggregationJob, session: Parties, plain: Mapping[str, np.ndarray] | None,
                   server: str | None) -> SecureRelease:
    """Charge and run the already agreed ``session`` of ``job`` inside ``run`` (``_run``); its processes are ended
    here whatever happens."""
    try:
        if session.job.digest() != job.with_addresses().digest():
            raise ValidationError("the agreed parties hold another job than this run's (its plan, bounds or parties differ)")
        return _run(run, job, lambda j, charge: session.finish(charge), plain, server)
    finally:
        session.__exit__(None, None, None)


def gram_job(plan: CalibratedPlan, products: CrossProducts, *, parties: Sequence[str], threshold: int, bound: float,
             timeout: float, addresses: Sequence[str] | None = None, tls: bool = True) -> AggregationJob:
    """The public job of a secure Gram (``secure_gram_release``): one node per declared block, every party of
    ``parties`` adds a noise share."""
    names = [b.name for b in products.blocks]
    return build_job(plan, names, dict.fromkeys(names, bound), parties=parties, contributors=list(parties),
                     threshold=threshold, timeout=timeout, products=products, addresses=addresses, tls=tls)


def decline_own_party(job: AggregationJob, own: str, why: str, progress: Any = None, certificates: Any = None,
                      reason: str | None = None) -> None:
    """Take part in the agreement of ``job`` as party ``own``, not ready (``why``: the kind of failure, never data),
    so that the other parties stop at once with nothing charged; returns when they have heard it (or timed out).
    ``progress`` first hears that this party cannot take part (``reason``: its own fuller account, default ``why``)."""
    if progress is not None:
        progress(f"[{own}] cannot take part ({why if reason is None else reason}); telling the other parties, nothing is "
                 f"charged (at most {job.timeout:g} s)")
    try:
        run_own_party(job, own, None, certificates=certificates, decline=why, progress=progress)
    except PartyFailed:
        pass  # expected: this party and every other stops at the agreement


@contextlib.contextmanager
def declining(job: AggregationJob, own: str, progress: Any = None, certificates: Any = None) -> Iterator[None]:
    """Inside: party ``own``'s own checks before the agreement (its data, its ledger's ``preflight``). A
    ``PrivsdrError`` there tells the other parties that this one is not ready (``decline_own_party``: the kind of
    failure only), so every party stops with nothing charged; then it is re-raised."""
    try:
        yield
    except PrivsdrError as exc:
        decline_own_party(job, own, f"{type(exc).__name__} at party {own!r} (its own output says why)", progress, certificates,
                          reason=str(exc))
        raise


def agreed_own_party(job: AggregationJob, own: str, inputs: Mapping[str, np.ndarray] | None, progress: Any = None,
                     certificates: Any = None) -> Parties:
    """Start party ``own``'s process and wait until every party has agreed on ``job`` and is ready (issue 36: before
    the caller opens its run, so a failure here leaves its journal untouched). The caller exits the result (it ends
    the process); raises ``SecureAggregationError`` (nothing charged) if the parties do not all agree."""
    return _agreed(own_party(job, own, inputs, certificates=certificates, progress=progress))


def agreed_parties(job: AggregationJob, inputs: Mapping[str, Mapping[str, Any] | None], *, certificates: Any = None,
                   record_view: bool = False) -> Parties:
    """Every party of ``job`` as a process on this machine (``launch.run_parties``), started and agreed on the job,
    before the caller opens its run (module docstring): a failure here (a party that cannot start, listen, connect
    or agree) raises ``SecureAggregationError`` with nothing charged and nothing written to any journal. The caller
    passes the result as ``session`` (or exits it)."""
    check_inputs_given(job, inputs)
    job = job.with_addresses()
    return _agreed(start_parties(job, inputs, certificates=certificates, record_view=record_view))


def start_parties(job: AggregationJob, inputs: Mapping[str, Mapping[str, Any] | None], *, certificates: Any = None,
                  record_view: bool = False) -> Parties:
    """Every party of ``job`` as a process on this machine (not started until entered). The one seam of the agreed
    path, as ``run_parties`` is of the one-call path: ``privsdr.audit.secure_probe.in_process`` replaces both to run the
    party program in this process."""
    return Parties(job, inputs, job.parties, certificates=certificates, record_view=record_view)


def _agreed(party: Parties) -> Parties:
    party.__enter__()
    try:
        party.agree()
    except BaseException as exc:
        party.__exit__(None, None, None)
        if isinstance(exc, PartyFailed):
            raise SecureAggregationError(str(exc), exc.party, exc.pids, False) from None
        if isinstance(exc, Interrupted):
            raise Interrupted(f"{exc}; the party processes it started were ended; nothing was charged") from None
        raise
    return party


def secure_gram_release(run: Run, products: CrossProducts, data: Mapping[str, Mapping[str, np.ndarray]], *,
                        parties: Sequence[str], threshold: int, bound: float, timeout: float = 60.0, helper: str | None = None,
                        record_view: bool = False, own: str | None = None, addresses: Sequence[str] | None = None,
                        tls: bool = True, certificates: Any = None, progress: Any = None,
                        session: Parties | None = None) -> SecureRelease:
    """Release the blocks ``products`` declares (one plan node each, by name) as a secure Gram (``crossproducts``) of
    the data parties' integer column groups (``data``: party -> key -> array, clipped and rounded by each party);
    every party of ``parties`` (data parties and a helper) adds a noise share. ``bound``: a public bound on every
    entry of the Gram in real units (it sizes the field).

    ``own``: run only this party (``data`` holds its own arrays only, or nothing for a helper); the others
    run the same job elsewhere, at ``addresses``; ``progress(line)`` hears while it waits; ``session``: that party's
    process, already agreed (``agreed_own_party``). ``tls``, ``certificates``: the channels (``launch``: ``own`` gives
    its own folder; a simulated run, a mapping or None)."""
    job = gram_job(run.plan, products, parties=parties, threshold=threshold, bound=bound, timeout=timeout, addresses=addresses, tls=tls)
    if own is not None:
        if session is None:
            if not addresses:
                raise ValidationError("one party's run needs every party's address (host:port)")
            session = agreed_own_party(job, own, products.inputs(data, own).get(own), progress, certificates)
        return release_agreed(run, job, session, None, helper)
    # the noise-free Gram, for the replay audit's tap only (a simulated fit holds every block; one more pass of its rows)
    plain = products.plain(data) if tap.active() is not None else None
    if session is not None:  # every party here, agreed before the run was opened (``agreed_parties``)
        return release_agreed(run, job, session, plain, helper)
    inputs = products.inputs(data)
    return _run(run, job, lambda j, charge: run_parties(j, inputs, charge=charge, record_view=record_view, certificates=certificates),
                plain, helper)


def spent_note(run: Run) -> str:
    """What a run that fails after the charge says at this party: what it spent, and that nothing was released."""
    budget = run.plan.budget
    return (f"; this party spent epsilon={budget.epsilon:g}, delta={budget.delta:g} on its ledger for this run (closed as "
            "failed in its journal)")


def _run(run: Run, job: AggregationJob, parties: Callable[[AggregationJob, Callable[[], None]], Opened],
         plain: Mapping[str, np.ndarray] | None, server: str | None) -> SecureRelease:
    """Run the parties; when every party has agreed on the public job, charge the job's nodes (write-ahead: before
    any share exists); accept the opened values (real units). ``plain``: the noise-free values when this process
    holds every input (the replay audit's tap), else None."""
    names = [node.name for node in job.nodes]
    charged = []

    def charge() -> None:
        before = run.ledger.spent
        try:
            run.issue(*names)  # write-ahead: every node charged before any share exists, after every party agreed
        except Exception as exc:  # e.g. its journal refused the write: the processes tell the others (the charged round)
            spent = ("nothing was charged on this party's ledger" if run.ledger.spent == before else
                     "what it charged stays charged and its journal closes the run as failed")
            raise SecureAggregationError(f"this party could not charge its ledger after every party was ready ({type(exc).__name__}: "
                                         f"{exc}); it told the other parties, and every party stopped before drawing a noise share: "
                                         f"nothing was released; {spent}", None, (), run.ledger.spent != before) from exc
        charged.append(True)

    try:
        opened = parties(job, charge)
    except PartyFailed as exc:
        raise SecureAggregationError(str(exc) + (spent_note(run) if charged else ""), exc.party, exc.pids, bool(charged)) from None
    except Interrupted as exc:  # SIGTERM/SIGHUP: every process was ended on the way here
        raise Interrupted(f"{exc}; every party process it started was ended"
                          + (spent_note(run) if charged else "; nothing was charged")) from None
    values: dict[str, np.ndarray] = {}
    at = 0
    for node in job.nodes:
        chunk = opened.aggregate[at:at + node.dimension].astype(float) * node.gamma
        at += node.dimension
        value = from_upper_triangle(chunk, node.square) if node.square is not None else chunk
        if plain is not None:  # the replay audit's tap sees the noise-free value
            clean = np.asarray(plain[node.name], dtype=float).reshape(np.shape(value)) if node.square is None else plain[node.name]
            value = tap.release_seen((run.algorithm, node.name), clean, value, run.plan.specs[node.name])
        values[node.name] = value
        run.accept(node.name, value, run.plan.specs[node.name])
    run.trust_model = trust_model(job, server, run.plan.budget)
    return SecureRelease(values, job, opened)
