"""Issue 10 item 2: results you can keep. Model files round-trip for every estimator, are JSON
without pickle, carry a digest that the privacy report records, and refuse edits; ``privsdr fit
--out`` + ``privsdr transform`` project new rows; FederatedSIR gets transform, unit directions,
ledger=/journal support and the CLI's defaults."""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import spent, write_table

from privsdr import (
    DPPLS,
    DPSIR,
    AdaSSPRegression,
    Budget,
    BudgetExceededError,
    DPMeanCovariance,
    DPSparsePCA,
    FederatedSIR,
    Ledger,
    SparseDPSIR,
    ValidationError,
    load_model,
)
from privsdr.algorithms import MSC
from privsdr.datasets import fsir_model, sir_model
from privsdr.persistence import FORMAT, payload_digest

CUTS = [-3.0, 0.0, 3.0]


def _fitted():
    X, y, _ = sir_model("M1", 800, 5, seed=2)
    Xs, ys, _ = sir_model("M1", 300, 12, seed=3)
    Xf, yf, _ = fsir_model("III", 600, 10, seed=4)
    Xg, yg, _ = fsir_model("III", 500, 10, seed=5)
    budget = Budget(2.0, 1e-5)
    return {
        "DPSIR": (DPSIR(1, bound=[1.0, 1.0, 0.5, 2.0, 1.0], cut_points=CUTS, budget=budget, random_state=0).fit(X, y), X),
        "SparseDPSIR": (SparseDPSIR(1, sparsity=3, bound=1.0, cut_points=CUTS, budget=budget, accountant="basic",
                                    random_state=0).fit(Xs, ys), Xs),
        "DPSparsePCA": (DPSparsePCA(1, sparsity=2, bound=1.0, budget=budget, random_state=0).fit(X), X),
        "DPMeanCovariance": (DPMeanCovariance(clip=2.0, budget=budget, random_state=0).fit(X), None),
        "FederatedSIR": (FederatedSIR(2, bound=3.0, cut_points=[-1.0, 0.0, 1.0], budget=budget, random_state=0)
                         .fit([(Xf, yf), (Xg, yg)]), Xf),
        "DPPLS": (DPPLS(2, bound_x=2.0, bound_y=4.0, budget=budget, random_state=0).fit(X, y), X),
        "AdaSSPRegression": (AdaSSPRegression(bound_x=2.0, bound_y=4.0, budget=budget, random_state=0).fit(X, y), X),
        "DPPLS (paper)": (DPPLS(2, mode="paper", budget=Budget(1.0, 1e-3), allow_uncertified=True, random_state=0).fit(X, y), X),
        "MSC": (MSC("dp_mean", bound=3.0, budget=budget, random_state=0).fit(X + 2.0), X + 2.0),
    }


@pytest.fixture(scope="module")
def fitted():
    return _fitted()


def _same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("name", ["DPSIR", "SparseDPSIR", "DPSparsePCA", "DPMeanCovariance", "FederatedSIR", "DPPLS",
                                  "AdaSSPRegression", "DPPLS (paper)", "MSC"])
def test_save_load_round_trip(name, fitted, tmp_path):
    est, X = fitted[name]
    path = tmp_path / "model.json"
    digest = est.save(path)
    document = json.loads(path.read_text())  # plain JSON: no pickle anywhere
    assert document["format"] == FORMAT and document["format_version"] == 1 and document["estimator"] == type(est).__name__
    assert document["digest"] == digest == est.privacy_report_.model["digest"]
    assert "random_state" not in document["params"] and "ledger" not in document["params"]  # never the seed or the account
    again = type(est).load(path)
    assert type(again) is type(est)
    for attr in est.model_attributes:
        if hasattr(est, attr):
            assert _same(getattr(again, attr), getattr(est, attr)), attr
    assert again.privacy_report_ == est.privacy_report_
    assert again.model_digest_ == digest
    if X is not None:
        use = "transform" if hasattr(est, "transform") else "predict"
        assert np.array_equal(getattr(again, use)(X), getattr(est, use)(X))
    assert type(load_model(path)) is type(est)


def test_every_fit_method_can_write_its_model():
    """``privsdr fit M --out`` checks this before any charge; a method whose estimator cannot be saved would
    be refused there, so every method the CLI offers must be saveable."""
    from privsdr.cli.fit import METHODS
    from privsdr.persistence import model_classes

    for name, estimator in (("mean-covariance", DPMeanCovariance), ("dpsir", DPSIR), ("pls", DPPLS), ("adassp", AdaSSPRegression),
                            ("sparse-dpsir", SparseDPSIR), ("sparse-pca", DPSparsePCA)):
        assert name in METHODS and model_classes()[estimator.__name__] is estimator
    assert set(METHODS) == {"mean-covariance", "dpsir", "pls", "adassp", "sparse-dpsir", "sparse-pca"}


def test_an_estimator_that_released_nothing_private_has_nothing_to_save(tmp_path):
    est = MSC(np.ones(4)).fit(np.ones((3, 4)))  # a public reference: free, no report
    with pytest.raises(ValidationError, match="released nothing private"):
        est.save(tmp_path / "msc.json")
    assert not (tmp_path / "msc.json").exists()


def test_the_report_names_its_model_and_edits_are_refused(fitted, tmp_path):
    est, _ = fitted["DPSIR"]
    path = tmp_path / "m.json"
    est.save(path)
    document = json.loads(path.read_text())
    payload = {k: document[k] for k in ("format", "format_version", "estimator", "privsdr_version", "params", "fitted", "metadata")}
    assert payload_digest(payload) == document["digest"]
    edited = json.loads(path.read_text())
    edited["fitted"]["directions_"]["$array"]["data"][0] += 0.5
    path.write_text(json.dumps(edited))
    with pytest.raises(ValidationError, match="modified"):
        DPSIR.load(path)
    other = json.loads(json.dumps(document))
    other["privacy_report"]["model"]["digest"] = "sha256:" + "0" * 64
    path.write_text(json.dumps(other))
    with pytest.raises(ValidationError, match="another model"):
        DPSIR.load(path)
    path.write_text(json.dumps(document))
    with pytest.raises(ValidationError, match="not a DPSparsePCA"):
        DPSparsePCA.load(path)
    path.write_text("<html></html>")
    with pytest.raises(ValidationError, match="not a privsdr model file"):
        load_model(path)
    with pytest.raises(ValidationError, match="not fitted"):
        DPSIR(1, bound=1.0, cut_points=CUTS, budget=Budget(1.0, 1e-6)).save(tmp_path / "unfitted.json")
    assert not (tmp_path / "unfitted.json").exists()


def test_cli_fit_out_and_transform(tmp_path, sir_table, journal, cli):
    model, report = tmp_path / "model.json", tmp_path / "report.json"
    before = spent(journal)
    r = cli("fit", "dpsir", "--data", sir_table, "--target", "y", "--bound", 1, "--cut-points", -3, 0, 3, "--journal", journal,
            "--out", model, "--report", report)
    assert r.code == 0, r.err
    assert spent(journal).epsilon > before.epsilon
    est = load_model(model)
    assert json.loads(report.read_text())["model"]["digest"] == est.model_digest_ == json.loads(model.read_text())["digest"]
    assert est.model_metadata_["columns"] == ["x1", "x2", "x3", "x4"]
    new = tmp_path / "new.csv"
    rng = np.random.default_rng(9)
    write_table(new, rng.uniform(-2, 2, (50, 4)), np.zeros(50))
    Xn = np.loadtxt(new, delimiter=",", skiprows=1)[:, :4]
    out = tmp_path / "proj.csv"
    charged = journal.read_bytes()
    r = cli("transform", "--model", model, "--data", new, "--out", out)
    assert r.code == 0, r.err
    projected = np.loadtxt(out, delimiter=",", skiprows=1, ndmin=2)
    assert np.array_equal(projected, est.transform(Xn))  # clipped to the model's public bounds, then projected
    centred = np.clip(Xn, -1, 1) - est.center_  # the moments estimator centres on its DP mean (public centre 0)
    assert np.allclose(projected, centred @ est.directions_)
    assert journal.read_bytes() == charged  # transform spends nothing
    mc = tmp_path / "mc.json"
    assert cli("fit", "mean-covariance", "--data", sir_table, "--target", "y", "--clip", 2, "--out", mc).code == 0
    r = cli("transform", "--model", mc, "--data", new)
    assert r.code == 2 and "no transform" in r.err


def test_federated_sir_directions_have_unit_length_on_diabetes():
    """Issue 10: directions_ had norm ~55 on diabetes (Sigma^-1 U unscaled)."""
    sklearn = pytest.importorskip("sklearn.datasets")
    X, y = sklearn.load_diabetes(return_X_y=True)
    bound = np.full(X.shape[1], 0.2)  # the bundled features are scaled: |x| <= 0.2 for every column (public)
    clients = [(X[k::3], y[k::3]) for k in range(3)]
    est = FederatedSIR(1, bound=bound, cut_points=[100.0, 150.0, 200.0], budget=Budget(4.0, 1e-5), random_state=0).fit(clients)
    assert np.allclose(np.linalg.norm(est.directions_, axis=0), 1.0)
    assert est.privacy_report_.status == "certified"
    Z = est.transform(X)
    assert Z.shape == (442, 1) and np.allclose(Z, (np.clip(X, -0.2, 0.2) - est.center_) @ est.directions_)  # centred at the DP mean


def test_federated_sir_defaults_are_the_cli_defaults():
    from privsdr.cli import build_parser
    from privsdr.federated import FSIRConfig

    defaults = build_parser().parse_args(["fsir", "config", "c.json", "--bound", "1", "--cut-points", "0"])
    est = FederatedSIR(1, bound=1.0, cut_points=[0.0])
    for name in ("mechanism", "cov_mechanism", "calibration", "center", "center_share"):
        assert getattr(est, name) == getattr(defaults, name) == getattr(FSIRConfig(bound=1.0, cut_points=[0.0]), name)
    assert (est.mechanism, est.cov_mechanism, est.calibration, est.center) == ("iid", "analyze_gauss", "analytic", "dp")


def _fsir_clients(sizes=(400, 700, 300)):
    out = []
    for k, n in enumerate(sizes):
        X, y, _ = fsir_model("III", n, 10, seed=20 + k)
        out.append((X, y))
    return out


def test_federated_sir_charges_one_ledger_in_parallel_over_clients(tmp_path):
    """With ledger= (here a journal) every client node is charged to it; clients are disjoint, so
    the per-record cost is one client's, not the sum over clients."""
    journal = tmp_path / "fsir.jsonl"
    ledger = Ledger(Budget(3.0, 1e-4), accountant="basic", journal=journal)
    est = FederatedSIR(1, bound=3.0, cut_points=[-1.0, 0.0, 1.0], budget=Budget(1.0, 1e-5), ledger=ledger, random_state=0)
    from privsdr.federated import client_plan

    est.fit(_fsir_clients())
    one_client = client_plan(est.config_, 400, 10, Budget(1.0, 1e-5)).cost("basic")  # the same under every client size
    assert Ledger.open(journal).spent == pytest.approx(one_client) and one_client.epsilon == pytest.approx(1.0)
    assert est.privacy_report_.status == "certified" and len(est.privacy_report_.nodes) == 3 * 3  # proportions, means, moment
    assert est.privacy_report_.budget["spent_by_run"]["epsilon"] == pytest.approx(one_client.epsilon)
    est.fit(_fsir_clients())  # a second fit on the same clients composes sequentially
    assert Ledger.open(journal).spent.epsilon == pytest.approx(2 * one_client.epsilon)


def test_federated_sir_charges_before_any_client_draws_noise(monkeypatch):
    """Write-ahead: when a client starts computing its upload, its nodes are already spent."""
    import privsdr.federated.estimator as estimator_module

    ledger = Ledger(Budget(5.0, 1e-4), accountant="basic")
    seen = []
    real = estimator_module.client_message

    def spy(**kw):
        seen.append(ledger.spent.epsilon)
        return real(**kw)

    monkeypatch.setattr(estimator_module, "client_message", spy)
    FederatedSIR(1, bound=3.0, cut_points=[-1.0, 0.0, 1.0], budget=Budget(1.0, 1e-5), ledger=ledger, random_state=0).fit(_fsir_clients())
    assert seen == [pytest.approx(1.0)] * 3 and ledger.spent.epsilon == pytest.approx(1.0)


def test_federated_sir_refuses_before_any_client_runs(tmp_path, monkeypatch):
    import privsdr.federated.estimator as estimator_module

    ran = []
    monkeypatch.setattr(estimator_module, "client_message", lambda **kw: ran.append(kw))
    ledger = Ledger(Budget(0.5, 1e-5), accountant="basic")
    with pytest.raises(BudgetExceededError):
        FederatedSIR(1, bound=3.0, cut_points=[-1.0, 0.0, 1.0], budget=Budget(1.0, 1e-5), ledger=ledger).fit(_fsir_clients())
    assert ran == [] and ledger.spent.epsilon == 0
    bad = _fsir_clients()
    bad[2] = (bad[2][0], np.full(bad[2][0].shape[0], np.nan))  # the last client's data is bad
    with pytest.raises(ValidationError, match="finite"):
        FederatedSIR(1, bound=3.0, cut_points=[-1.0, 0.0, 1.0], ledger=Ledger(Budget(2.0, 1e-5))).fit(bad)
    assert ran == []
    with pytest.raises(ValidationError, match="executor"):
        FederatedSIR(1, bound=3.0, cut_points=[-1.0, 0.0, 1.0], budget=Budget(1.0, 1e-5), executor="threads").fit(_fsir_clients())


def test_federated_sir_with_only_a_ledger_spends_what_remains():
    ledger = Ledger(Budget(1.0, 1e-5), accountant="basic")
    FederatedSIR(1, bound=3.0, cut_points=[-1.0, 0.0, 1.0], ledger=ledger, random_state=1).fit(_fsir_clients())
    assert ledger.spent.epsilon == pytest.approx(1.0)
    with pytest.raises(BudgetExceededError):
        FederatedSIR(1, bound=3.0, cut_points=[-1.0, 0.0, 1.0], ledger=ledger).fit(_fsir_clients())
