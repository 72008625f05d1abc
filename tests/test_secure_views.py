"""Issue 33, item 2 and the secure paths' smaller untruths: every sentence of a secure report's trust model is
checked against what the party processes actually receive (recorded by the party program itself, real MPyC
processes on 127.0.0.1), the secure Gram states the weaker guarantee a deviating data party leaves, no filed output
of an add/remove fit depends on N, and raw-unit data with bounds orders of magnitude apart fits (item 4).

The views run real party processes (what each receives). The fits run the party program in this process
(``privsdr.audit.secure_probe``: the parties' own input and computation on plain integers, real noise shares), which
also checks that every opened value lies within the job's field, where MPyC opens the integer sum exactly (that the
processes do is tested in ``tests/test_secure_vertical.py``): the rescale and the reports are computed in this process
from the public bounds and the opened values."""
from __future__ import annotations

import math
import warnings

import attrs
import numpy as np
import pytest
from conftest import gone
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LinearRegression

from privsdr import Budget, SecureVerticalRegression
from privsdr.audit.secure_probe import in_process, run_in_process
from privsdr.secure.job import AggregationJob, NodeJob
from privsdr.secure.launch import run_parties
from privsdr.secure.party import RECEIVING_STEPS
from privsdr.secure.trust import PLAINTEXT_CHANNELS, TLS_CHANNELS, describe, received, trust_model
from privsdr.vertical.secure_regression import column_scales, gram_layout, label_scale

pytest.importorskip("mpyc")

OBJECTS = ("vector", "block", "label")


def recorded_view(job: AggregationJob, party: str, opened) -> dict:
    """What ``party``'s process received, read off its own recording: the shares it holds of each peer's objects
    (``view/...``, one entry per secret-shared object) and its message tally by MPyC step (``receipts``)."""
    views, receipts = opened.views[party], opened.receipts[party]
    steps = set(RECEIVING_STEPS.values()) | {"keys"}
    assert set(receipts) <= steps, f"{party} received messages in steps no sentence names: {sorted(set(receipts) - steps)}"
    inputs = {}
    for peer in job.parties:
        objects = [o for o in OBJECTS if (peer if o == "vector" else f"{o}:{peer}") in views]
        assert receipts.get("input", {}).get(peer, 0) == len(objects), (party, peer, receipts.get("input"), objects)
        if objects:
            inputs[peer] = objects
    in_order = lambda step: [p for p in job.parties if p in receipts.get(step, {})]  # noqa: E731
    return {"keys": in_order("keys"), "input": inputs, "reshare": in_order("reshare"), "open": in_order("open"),
            "sync": in_order("sync")}


def gram_job(N: int = 16) -> AggregationJob:
    e = -10
    products = gram_layout(N, [("party0", 1), ("party1", 2)], "party0", e, 0)
    nodes = (NodeJob("xtx", 6, 4.0**e, (0, 1), 128.0, 3), NodeJob("xty", 3, 4.0**e, (0, 1), 128.0))
    return AggregationJob(["helper", "party0", "party1"], ["helper", "party0", "party1"], 1, nodes, 60.0, products)


def sum_job() -> AggregationJob:
    return AggregationJob(["server", "a", "b"], ["a", "b"], 1, (NodeJob("v", 3, 1.0, (0, 1), 5.0),), 60.0)


@pytest.mark.parametrize("which", ["gram", "sum", "sum-plaintext"])
def test_what_each_party_sees_is_what_its_process_receives(which):
    """Every party's sentence in the report is ``describe`` of what its real process recorded receiving, message by
    message: the FSIR server receives shares of every client's vector (not "the opened sums only"), a data party of
    the secure Gram the other parties' columns, label and resharings, and nobody anything the sentence leaves out.
    Issue 36: the channels sentence says mutual TLS exactly when every process held TLS connections whose peer
    certificates name the peers' parties, and plaintext exactly when none did."""
    if which == "gram":
        job, N = gram_job(), 16
        inputs = {"party0": {"block": np.ones((N, 1), dtype=np.int64), "label": np.arange(N, dtype=np.int64)},
                  "party1": {"block": np.ones((N, 2), dtype=np.int64)}}
    else:
        job, inputs = sum_job(), {"a": {"v": np.zeros(3)}, "b": {"v": np.ones(3)}}
        job = attrs.evolve(job, tls=which == "sum")
    opened = run_parties(job, inputs, record_view=True)
    assert gone(opened.pids)
    sentences = trust_model(job)["what_each_party_sees"]
    channels = trust_model(job)["assumptions"][2]
    for party in job.parties:
        held = opened.channels[party]
        peers = {p: [f"MPyC party {job.index(p)}", p] if job.tls else [] for p in job.parties if p != party}  # id and name
        expected = {"tls": job.tls, "peer_certificates": peers}
        if job.tls:  # "certificates of one CA": its dialing side trusted the run's CA alone (``party.trust_own_files``)
            expected["trusted_cas"] = ["privsdr MPyC CA"]
        assert held == expected, party
    assert channels.startswith("channels: " + (TLS_CHANNELS if job.tls else PLAINTEXT_CHANNELS))
    assert ("plaintext channels" in trust_model(job)["status"]) != job.tls
    for party in job.parties:
        view = recorded_view(job, party, opened)
        assert view["sync"] == [p for p in job.parties if p != party]  # barriers: no data
        assert view == received(job, party), party
        assert sentences[party] == describe(job, party, view), party
    if which == "sum":
        assert "Shamir shares (uniformly random field elements) of a's vector" in sentences["server"]
        assert "opened noisy sums only" not in sentences["server"]


def test_the_secure_gram_states_the_guarantee_a_deviating_data_party_leaves_and_the_channels_honestly():
    gram, plain = trust_model(gram_job(), budget=Budget(1.0, 1e-6)), trust_model(sum_job(), "server", Budget(1.0, 1e-6))
    deviation = gram["assumptions"][0]
    assert "Nothing inside the secure computation checks what a data party inputs" in deviation
    assert "r mu-GDP" in deviation and "not the other parties' privacy" not in deviation
    assert "not the other parties' privacy" in plain["assumptions"][0]  # additions only: true there
    for model in (gram, plain):  # issue 36: TLS by default; plaintext only when asked for, and then said
        assert "mutual TLS" in model["assumptions"][2] and "names the party it claims to be" in model["assumptions"][2]
        assert "plaintext" not in model["status"]
    for job in (gram_job(), sum_job()):
        channels = trust_model(attrs.evolve(job, tls=False))["assumptions"][2]
        assert "neither encrypted nor authenticated" in channels and "can claim to be another party" in channels
    # group privacy for one party's own values in one row: (2 eps, (1 + e^eps) delta)
    assert f"({2.0:.4g}, {(1 + math.e) * 1e-6:.3g})" in gram["own_values"] and "own_values" not in plain


def diabetes():
    X, y = load_diabetes(return_X_y=True)  # X standardised by sklearn (|x| < 0.2), y in raw units (25 .. 346)
    return X, y


@pytest.mark.parametrize("case", ["label", "columns"])
def test_raw_unit_data_with_bounds_orders_of_magnitude_apart_fits_by_a_public_rescale(case, monkeypatch):
    """Item 4: sklearn's diabetes with y in raw units (label bound 400, 1333 x a party's row bound 0.3; no row clipped)
    and, in the second case, the second party's columns in units 1000 times smaller (bound 300). Main refused the first
    with a bare ValueError (noise on or off) and, in the second, left the small party two grid steps of resolution.
    Every block and the label are now rescaled by powers of two read off the public bounds only, and the coefficients
    scaled back: noise off, the fit is pooled least squares on the raw-unit data."""
    X, y = diabetes()
    row_bound: float | dict[str, float] = 0.3
    if case == "columns":
        X = np.hstack([X[:, :5], 1000.0 * X[:, 5:]])
        row_bound = {"party0": 0.3, "party1": 300.0}
    kw = {"row_bound": row_bound, "label_bound": 400.0, "y_center": 150.0, "n_parties": 2, "timeout": 60.0}
    in_process(monkeypatch.setattr, run_in_process)
    exact = SecureVerticalRegression(**kw, budget=Budget.infinite()).fit(X, y)
    ols = LinearRegression().fit(X, y)
    assert np.abs(exact.predict(X) - ols.predict(X)).max() < 0.05  # y's sd is 77: the fixed-point grid's rounding only
    scaled_ols = ols.coef_ / np.repeat([1.0, 1000.0 if case == "columns" else 1.0], 5)
    scaled_fit = exact.coef_ / np.repeat([1.0, 1000.0 if case == "columns" else 1.0], 5)
    assert np.allclose(scaled_fit, scaled_ols, rtol=0, atol=0.02 * np.abs(scaled_ols).max())  # diabetes' Gram: condition ~ 10^3
    public = exact.plan_.plan.public_params
    scales = column_scales({"party0": 0.3, "party1": 300.0 if case == "columns" else 0.3})
    assert public["row_scales"] == scales == ({"party0": 1024.0, "party1": 1.0} if case == "columns" else {"party0": 1.0, "party1": 1.0})
    C = math.sqrt(2) * (300.0 if case == "columns" else 0.3)
    assert public["label_scale"] == label_scale(C, 400.0)  # the declared bounds, never y
    assert public == SecureVerticalRegression(**kw, budget=Budget(1.0, 1e-6)).build_plan({"party0": 5, "party1": 5}).public_params
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        noisy = SecureVerticalRegression(**kw, budget=Budget(1.0, 1e-6), random_state=0).fit(X, y)
    assert noisy.privacy_report_.status == "certified" and np.all(np.isfinite(noisy.coef_))


def test_no_report_of_an_add_remove_fit_depends_on_N(monkeypatch):
    """Data sets of 300 and 4000 rows give the same report but for its run id and timestamps: the same trust model and
    field size (main sized the field from N: 41 bits up to N = 511 and 42 from 512 in the issue's case), because the
    field now comes from the public max_rows."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 4)) * 0.3
    y = X @ np.array([1.0, -1.0, 0.5, 0.0]) + 0.1 * rng.normal(size=4000)
    reports, bits = [], []
    in_process(monkeypatch.setattr, run_in_process)
    for n in (300, 4000):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = SecureVerticalRegression(row_bound=1.0, label_bound=3.0, n_parties=2, budget=Budget(1.0, 1e-6), random_state=0,
                                           diagnose_noise=False, max_rows=2**20).fit(X[:n], y[:n])
        reports.append({k: v for k, v in est.privacy_report_.to_dict().items() if k not in ("run_id", "timestamps")})
        bits.append(est.secure_cost_["field_bits"])
    assert bits[0] == bits[1] == reports[0]["trust_model"]["field_bits"]
    assert reports[0] == reports[1]


def test_the_in_process_parties_refuse_an_opening_beyond_the_field(monkeypatch):
    """The fits above run in this process: their openings equal the real ones only while every opened value lies within
    +-2^(bits - 1) of the job's secure integers. A field too small for the sum (4 bits: +-8, for a sum of 10) raises
    there, where the real parties would open the sum wrapped around the field."""
    from privsdr.audit.secure_probe import FieldOverflow
    from privsdr.secure import job as job_module

    job, inputs = sum_job(), {"a": {"v": np.full(3, 5.0)}, "b": {"v": np.full(3, 5.0)}}
    assert job.bits == 5 and np.array_equal(run_in_process(job, inputs).aggregate, [10, 10, 10])  # +-16 holds the sum
    monkeypatch.setattr(job_module, "field_bits", lambda job: 4)
    with pytest.raises(FieldOverflow, match="4-bit secure integers cannot hold the sum"):
        run_in_process(job, inputs)
