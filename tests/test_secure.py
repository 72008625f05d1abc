"""Secure aggregation (``privsdr.secure``): the field sizing, the distributed noise and its price, real MPyC party
processes on 127.0.0.1 (started and ended by the tests), what a party sees, dropouts, timeouts and refusals."""
from __future__ import annotations

import asyncio
import json
import math
import socket
from fractions import Fraction

import attrs
import numpy as np
import pytest
from conftest import gone
from scipy import stats

from privsdr import Budget, Ledger, Plan, Run, Sensitivity, ValidationError
from privsdr.accounting import make_accountant
from privsdr.accounting.events import DistributedDiscreteGaussianEvent, distributed_tau
from privsdr.audit import GDP, audit
from privsdr.mechanisms import get_mechanism
from privsdr.mechanisms.distributed import share_noise
from privsdr.secure import AggregationJob, NodeJob, SecureAggregationError, field_bits, secure_release
from privsdr.secure.aggregate import build_job
from privsdr.secure.job import MAX_BITS
from privsdr.secure.launch import run_parties
from privsdr.secure.party import ShareRefused, disagreements, local_vector, own_address_loop
from privsdr.vertical.secure_regression import gram_layout

pytest.importorskip("mpyc")

PARTIES = ["server", "a", "b"]
TIMEOUT = 30.0


def plan_of(budget, d=6, parties=2, colluders=1, sensitivity=0.05, symmetric_p=None):
    plan = Plan("secure_test", "replace_one")
    plan.add("v", "distributed_gaussian", Sensitivity(sensitivity, "l2"), params={"parties": parties, "colluders": colluders, "dimension": d})
    if symmetric_p:
        plan.add("m", "distributed_symmetric_gaussian", Sensitivity(sensitivity, "l2"),
                 params={"parties": parties, "colluders": colluders, "dimension": symmetric_p * (symmetric_p + 1) // 2})
    return plan.allocate(budget)


# -- the public job: sizes, refusals ---------------------------------------------------------------------------
def test_the_field_fits_every_sum_the_bounds_allow_and_a_grid_too_fine_is_refused():
    node = NodeJob("v", 4, 2.0**-20, (10**6, 1), bound=1.0)
    job = AggregationJob(PARTIES, ["a", "b"], 1, (node,))
    bits = field_bits(job)
    worst = 2 * (node.grid_bound + node.share_bound)  # both contributors at the bound, both shares at the tail bound
    assert worst < 2 ** (bits - 1) and bits <= MAX_BITS
    vec = local_vector(job, {"v": np.ones(4)})  # a contribution at the bound plus a real share stays inside it
    assert np.all(np.abs(vec) <= node.grid_bound + node.share_bound)
    with pytest.raises(ValidationError, match="too fine"):
        AggregationJob(PARTIES, ["a", "b"], 1, (NodeJob("v", 4, 2.0**-60, (1, 1), bound=1.0),))
    for bad, match in [(dict(threshold=0), "1 <= t"), (dict(threshold=2), "honest majority"), (dict(parties=["a", "b"]), "at least 3"),
                       (dict(inputs=["a", "x"]), "contributing"), (dict(timeout=0.0), "timeout")]:
        kw = dict(parties=PARTIES, inputs=["a", "b"], threshold=1, nodes=(node,))
        with pytest.raises(ValidationError, match=match):
            AggregationJob(**{**kw, **bad})
    assert AggregationJob.from_json(job.to_json()) == job


def test_the_job_digest_covers_every_public_field_by_construction_and_survives_the_job_file():
    """Issue 33: the parties compare one digest of the whole public job before anything is charged. It changes with
    every field (the calibrated plan's record with its budget included), with a field added later without an edit
    (a subclass stands in for one), and a party process reading the job file computes the same digest."""
    calibrated = plan_of(Budget(1.0, 1e-6), d=4)
    job = build_job(calibrated, ["v"], {"v": 1.0}, parties=PARTIES, contributors=["a", "b"], threshold=1, timeout=TIMEOUT)
    record = json.loads(job.public)
    assert record["budget"] == {"epsilon": 1.0, "delta": 1e-6} and record["plan"]["relation"] == "replace_one"
    assert AggregationJob.from_json(job.to_json()).digest() == job.digest()
    node = job.nodes[0]
    five = attrs.evolve(job, parties=[*PARTIES, "c", "d"], addresses=())
    assert attrs.evolve(five, threshold=2).digest() != five.digest()  # t (with five parties: 1 or 2)
    edits = {"parties": ["a", "server", "b"], "inputs": ["a", "server"], "threshold": 2, "timeout": TIMEOUT + 1,
             "nodes": (attrs.evolve(node, sigma_local2=(node.sigma_local2[0] + 1, node.sigma_local2[1])),),
             "public": {**record, "budget": {"epsilon": 100.0, "delta": 1e-6}},
             "addresses": (job.addresses[1], job.addresses[0], job.addresses[2]), "tls": False}  # issue 36: addresses, TLS
    for field in attrs.fields(AggregationJob):
        if field.name in edits and field.name not in ("threshold", "parties"):
            assert attrs.evolve(job, **{field.name: edits[field.name]}).digest() != job.digest(), field.name
    products = gram_layout(10, [("a", 1), ("b", 1)], "a", -4, 1)
    gram = attrs.evolve(job, nodes=(NodeJob("xtx", 6, 2.0**-8, (1, 1), 9.0, 3), NodeJob("xty", 3, 2.0**-8, (1, 1), 9.0)),
                        inputs=PARTIES, products=products)
    assert attrs.evolve(gram, products=attrs.evolve(products, rows=11)).digest() != gram.digest()
    assert attrs.evolve(job, parties=edits["parties"]).digest() != job.digest()
    assert {f.name for f in attrs.fields(AggregationJob)} <= set(edits) | {"products"}  # a new field needs a case here
    at_100 = build_job(plan_of(Budget(100.0, 1e-6), d=4), ["v"], {"v": 1.0}, parties=PARTIES, contributors=["a", "b"],
                       threshold=1, timeout=TIMEOUT)
    assert at_100.digest() != job.digest()

    @attrs.frozen
    class Wider(AggregationJob):
        cap: int = 10  # e.g. a public cap on N that sizes the field

    assert Wider(**attrs.asdict(job, recurse=False), cap=11).digest() != Wider(**attrs.asdict(job, recurse=False)).digest()


def test_a_party_goes_on_only_when_every_party_is_ready_and_holds_its_digest():
    job = AggregationJob(PARTIES, ["a", "b"], 1, (NodeJob("v", 2, 2.0**-10, (0, 1), bound=1.0),), public={"budget": {"epsilon": 1.0}})
    other = attrs.evolve(job, public={"budget": {"epsilon": 100.0}}, timeout=job.timeout + 1)
    d, mine = job.digest(), [job.digest(), None, job.record()]
    assert disagreements(job, d, [mine] * 3) == []
    said = disagreements(job, d, [mine, [other.digest(), None, other.record()], [d, "BudgetExceededError at party 'b'", job.record()]])
    assert said == [f"'a' holds another public configuration (it differs in: public.budget, timeout; digest {other.digest()[:16]}, "
                    f"this party's {d[:16]})", "'b' is not ready (BudgetExceededError at party 'b')"]
    assert disagreements(job, d, [mine, "junk", mine]) == ["'a' sent no configuration digest"]


def test_a_party_refuses_a_statistic_beyond_its_public_bound_before_sending_anything():
    job = AggregationJob(PARTIES, ["a", "b"], 1, (NodeJob("v", 3, 2.0**-16, (0, 1), bound=1.0),))
    with pytest.raises(ShareRefused, match="public bound"):
        local_vector(job, {"v": np.array([0.5, 1.5, 0.0])})
    assert list(local_vector(job, {"v": np.array([0.5, -1.0, 0.0])})) == [2**15, -(2**16), 0]  # noise off: the rounded value


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.3"])
def test_the_party_program_listens_on_its_configured_host_only(host):
    loop = own_address_loop(host, 1, True, print)

    async def bound_address():
        server = await loop.create_server(asyncio.Protocol, port=0)  # as MPyC calls it: no host
        addresses = {s.getsockname()[0] for s in server.sockets}
        server.close()
        return addresses

    assert loop.run_until_complete(bound_address()) == {host}
    loop.close()
    asyncio.set_event_loop(asyncio.new_event_loop())


# -- the noise and its price -------------------------------------------------------------------------------------
@pytest.mark.parametrize("parties, colluders", [(2, 1), (10, 1), (10, 4)])
def test_the_honest_shares_alone_meet_the_calibration(parties, colluders):
    spec = plan_of(Budget(1.0, 1e-6), d=80, parties=parties, colluders=colluders).specs["v"]
    noise = share_noise(spec)
    honest = parties - colluders
    # the shares of the parties outside any coalition of t add up to the calibrated sigma (grid steps) ...
    assert float(noise.sigma_local2 * honest) == pytest.approx(noise.sigma_total**2, rel=1e-12)
    assert noise.sigma_total == pytest.approx(spec.noise_multiplier * noise.grid_sensitivity, rel=1e-12)
    # ... and the event prices exactly that: rho = (1/z + sqrt(d) tau)^2 / 2 with KLS21's tau over the honest shares
    (event,) = get_mechanism("distributed_gaussian").events(spec)
    assert event.tau == distributed_tau(noise.sigma_local, honest) == 0.0  # thousands of grid steps: tau underflows
    assert event.rho == pytest.approx(0.5 / spec.noise_multiplier**2, rel=1e-12)
    assert make_accountant("best", 1e-6).cost_of_atoms([[event]]).epsilon <= 1.0
    # without collusion the opened noise is larger: every party's share is in it
    assert noise.opened_sd == pytest.approx(noise.sigma_total * noise.gamma * math.sqrt(parties / honest), rel=1e-9)


def test_kls21_tau_matters_for_tiny_shares_and_is_charged():
    assert distributed_tau(0.3, 10) > 1.0 and distributed_tau(3.0, 10) < 1e-30  # 10 * 9 * exp(-2 pi^2 * 9 / 2) ~ 3e-38
    small, large = (DistributedDiscreteGaussianEvent(2.0, tau, 50, 1e-6) for tau in (0.0, 0.01))
    assert large.rho > small.rho and large.basic_cost().epsilon > small.basic_cost().epsilon


def test_the_aggregate_release_passes_its_audit_at_the_central_calibration_and_half_noise_fails():
    """The opened sum's distribution, simulated in process (every share drawn with the exact sampler, as the parties
    draw them): at eps = 4 its mu is the central Gaussian's; a half-noise variant is rejected."""
    mech = get_mechanism("distributed_gaussian")
    spec = plan_of(Budget(4.0, 1e-5), d=1, parties=3, colluders=1, sensitivity=1.0).specs["v"]
    noise = share_noise(spec)
    claim = GDP.gaussian(spec.noise_multiplier * math.sqrt(3 / 2), 1e-5)  # what three shares give: sqrt(3/2) x sigma_total

    def draw(value, scale):
        def mechanism(v, rng):
            return mech.sample(np.array([v]), spec.scaled(scale), rng)[0]
        return mechanism

    t = 0.5
    ok = audit(draw(0.0, 1.0), 0.0, 1.0, claim=claim, statistic=np.asarray, threshold=t, samples=1500, alpha=1e-3, seed=1)
    assert ok.passed, ok.summary()
    bad = audit(draw(0.0, 0.5), 0.0, 1.0, claim=claim, statistic=np.asarray, threshold=t, samples=1500, alpha=1e-3, seed=2)
    assert not bad.passed, bad.summary()
    assert noise.honest == 2


# -- real parties on loopback -------------------------------------------------------------------------------------
def test_noise_off_the_secure_sum_is_the_plain_sum_to_the_grid_and_every_process_ends():
    calibrated = plan_of(Budget.infinite(), d=5, symmetric_p=3)
    a = {"v": np.array([0.1, 0.2, -0.3, 0.4, 0.5]), "m": np.array([[0.5, 0.1, 0.0], [0.1, 0.2, -0.3], [0.0, -0.3, 0.9]])}
    b = {"v": np.array([0.01, -0.02, 0.03, 0.0, 1.0]), "m": np.eye(3) * 0.25}
    with Run(calibrated, Ledger(Budget.infinite()), random_state=0) as run:
        done = secure_release(run, ["v", "m"], {"a": a, "b": b}, {"v": 1.0, "m": 1.0}, parties=PARTIES, threshold=1, timeout=TIMEOUT)
    for name in ("v", "m"):
        grid = share_noise(calibrated.specs[name]).gamma
        assert np.allclose(done.values[name], a[name] + b[name], atol=2 * grid, rtol=0)
    assert np.allclose(done.values["m"], done.values["m"].T)
    assert len(done.opened.pids) == 3 and gone(done.opened.pids)
    # traffic as MPyC counts it: a contributor sends its input shares and its share of the sum, the server only the latter
    sent = done.opened.bytes_sent
    assert set(sent) == set(PARTIES) and sent["a"] > sent["server"] > 0 and sent["b"] > sent["server"]


def test_with_noise_the_opened_sum_carries_every_partys_share_and_the_report_states_the_trust_model():
    calibrated = plan_of(Budget(1.0, 1e-6), d=400, sensitivity=0.05)
    ledger = Ledger(Budget(1.0, 1e-6))
    zeros = {"v": np.zeros(400)}
    with Run(calibrated, ledger, random_state=0) as run:
        done = secure_release(run, ["v"], {"a": zeros, "b": zeros}, {"v": 1.0}, parties=PARTIES, threshold=1, timeout=TIMEOUT)
    noise = share_noise(calibrated.specs["v"])
    sd = float(np.std(done.values["v"]))
    assert 0.85 < sd / noise.opened_sd < 1.15, (sd, noise.opened_sd)  # two shares of sigma_total each
    report = run.report
    assert report.status_line.startswith("CERTIFIED (secure aggregation, <= 1 colluding parties)")
    assert report.trust_model["collusion_threshold"] == 1 and report.trust_model["contributors"] == ["a", "b"]
    assert "Shamir shares (uniformly random field elements) of a's vector" in report.trust_model["what_each_party_sees"]["server"]
    assert "Trust model" in report.to_markdown() and "Trust model" in report.to_html()
    assert type(report).from_json(report.to_json()) == report
    assert [n.sampler for n in report.nodes] == ["distributed"]
    assert ledger.spent.epsilon == pytest.approx(1.0, rel=1e-3)


def test_what_one_party_receives_does_not_depend_on_another_partys_data():
    """Party a's view of b's vector is its Shamir share: uniformly random field elements, whatever b holds. Two runs
    with very different data for b give a-views a two-sample test cannot tell apart (low 8 bits, 256 numbers each)."""
    calibrated = plan_of(Budget.infinite(), d=256)
    views = []
    for b_value in (np.zeros(256), np.linspace(-1, 1, 256)):
        with Run(calibrated, Ledger(Budget.infinite()), random_state=0) as run:
            done = secure_release(run, ["v"], {"a": {"v": np.zeros(256)}, "b": {"v": b_value}}, {"v": 1.0}, parties=PARTIES,
                                  threshold=1, timeout=TIMEOUT, record_view=True)
        views.append(np.array([int(x) % 256 for x in done.opened.views["a"]["b"]]))
    table = np.array([np.bincount(v // 32, minlength=8) for v in views])
    # MPyC's shares come from the OS's CSPRNG (no seed): thresholds at 1e-6 keep a false alarm out of any suite run,
    # while a view that carried b's numbers (all zeros in the first run) gives p < 1e-100
    assert stats.chi2_contingency(table).pvalue > 1e-6, table
    for v in views:  # and each looks uniform on its own
        assert stats.chisquare(np.bincount(v // 32, minlength=8)).pvalue > 1e-6, np.bincount(v // 32, minlength=8)
    assert not np.array_equal(views[0], views[1])


def test_a_party_that_refuses_its_input_stops_every_party_at_the_agreement_with_nothing_charged(tmp_path):
    calibrated = plan_of(Budget(1.0, 1e-6), d=4)
    journal = tmp_path / "budget.jsonl"
    ledger = Ledger(Budget(1.0, 1e-6), journal=journal)
    with pytest.raises(SecureAggregationError, match="party 'b'") as info:
        with Run(calibrated, ledger, random_state=0) as run:
            # b's statistic is beyond the public bound: b says it is not ready, and every party stops (issue 33)
            secure_release(run, ["v"], {"a": {"v": np.zeros(4)}, "b": {"v": np.full(4, 5.0)}}, {"v": 1.0}, parties=PARTIES,
                           threshold=1, timeout=TIMEOUT)
    assert info.value.party == "b" and len(info.value.pids) == 3 and gone(info.value.pids)
    assert not info.value.charged and "nothing was charged" in str(info.value) and "not ready" in str(info.value)
    assert Ledger.open(journal).charges == () and ledger.spent.epsilon == 0.0  # charged only once every party agreed
    assert run.outputs.get("v") is None  # nothing was released


def test_a_timeout_ends_every_party_and_names_who_never_connected():
    node = NodeJob("v", 2, 2.0**-10, (0, 1), bound=1.0)
    job = AggregationJob(PARTIES, ["a", "b"], 1, (node,), timeout=0.01)
    with pytest.raises(Exception, match="timed out|exit code 4") as info:
        run_parties(job, {"a": {"v": np.zeros(2)}, "b": {"v": np.zeros(2)}})
    assert gone(info.value.pids)


def test_the_ports_are_free_loopback_ports():
    from privsdr.secure.launch import free_ports

    ports = free_ports(5)
    assert len(set(ports)) == 5
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_share_variance_is_an_exact_fraction():
    spec = plan_of(Budget(2.0, 1e-6), d=10).specs["v"]
    assert isinstance(share_noise(spec).sigma_local2, Fraction)
