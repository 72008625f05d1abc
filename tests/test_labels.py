"""Issue 33 item 1: a warning that the guarantee does not hold changes the report's label too.

The one such warning (``docs/report.md``, "When the label is not CERTIFIED") is ``NonPrivatePreprocessingWarning``: a
fit in a scikit-learn Pipeline behind a step fitted on the rows without noise. Every estimator's privacy records are
then ``none``, with the reason, in the status, the status line, every rendering (summary, Markdown, HTML, JSON), a saved
and reloaded model file and the CLI's ``report``. On main the report stayed CERTIFIED with no word of the pipeline
(every test here but the last two failed there)."""
from __future__ import annotations

import inspect
import json
import warnings

import numpy as np
import pytest
from conftest import run_cli
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from privsdr import (
    DPPLS,
    DPSIR,
    AdaSSPRegression,
    Budget,
    DPBCDRegression,
    DPMeanCovariance,
    DPSparsePCA,
    DPStandardScaler,
    FederatedSIR,
    PRIDERegressor,
    PublicRangeScaler,
    SecureVerticalRegression,
    SparseDPSIR,
    load_model,
)
from privsdr.algorithms import MSC
from privsdr.errors import NonPrivatePreprocessingWarning
from privsdr.report import PrivacyReport

B = Budget(2.0, 1e-5)

#: every estimator privsdr exports that fits on rows, as it sits behind a row-reading step (pooled X, y)
ESTIMATORS = {
    "DPSIR": lambda: DPSIR(1, bound=3.0, cut_points=[-1.0, 0.0, 1.0], budget=B, random_state=0),
    "SparseDPSIR": lambda: SparseDPSIR(1, sparsity=2, bound=3.0, cut_points=[-1.0, 0.0, 1.0], budget=B, random_state=0),
    "DPSparsePCA": lambda: DPSparsePCA(1, sparsity=2, bound=3.0, budget=B, random_state=0),
    "DPMeanCovariance": lambda: DPMeanCovariance(clip=3.0, budget=B, random_state=0),
    "FederatedSIR": lambda: FederatedSIR(1, bound=3.0, cut_points=[-1.0, 0.0, 1.0], n_clients=2, budget=B, random_state=0),
    "DPPLS": lambda: DPPLS(1, bound_x=3.0, bound_y=5.0, budget=B, random_state=0),
    "AdaSSPRegression": lambda: AdaSSPRegression(bound_x=3.0, bound_y=5.0, budget=B, random_state=0),
    "MSC": lambda: MSC("dp_mean", bound=3.0, budget=B, random_state=0),
    "DPBCDRegression": lambda: DPBCDRegression(budget=B, row_bound=3.0, label_bound=5.0, coef_bound=3.0, n_rounds=2,
                                               n_parties=2, random_state=0),
    "PRIDERegressor": lambda: PRIDERegressor(budget=B, bounds=(-3.0, 3.0), n_parties=2, random_state=0),
    "DPStandardScaler": lambda: DPStandardScaler(bound=3.0, budget=B, random_state=0),
    "SecureVerticalRegression": lambda: SecureVerticalRegression(row_bound=3.0, label_bound=5.0, n_parties=2, budget=B,
                                                                 timeout=60.0, random_state=0),
}
PUBLIC = {"PublicRangeScaler"}  # reads nothing of the rows: no report to relabel


def _rows(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, X @ np.array([1.0, -1.0, 0.5, 0.0]) + 0.3 * rng.standard_normal(n)


def _records(est) -> list:
    """Every privacy record a fit left: its report(s) and, for the protocols, the summary with a status."""
    found = [est.privacy_report_] if getattr(est, "privacy_report_", None) is not None else []
    found += list(getattr(est, "privacy_reports_", {}).values())
    return found


def _fit_behind_a_scaler(name):
    X, y = _rows()
    pipe = make_pipeline(StandardScaler(), ESTIMATORS[name]())
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        pipe.fit(X, y)
    assert any(w.category is NonPrivatePreprocessingWarning for w in seen), "the library no longer warns here"
    return pipe[-1]


def test_every_exported_estimator_is_covered():
    import privsdr

    exported = {n for n in privsdr.__all__ if inspect.isclass(getattr(privsdr, n)) and hasattr(getattr(privsdr, n), "fit")}
    assert exported - set(ESTIMATORS) - PUBLIC == set()


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_a_fit_behind_a_row_reading_step_is_not_private_in_every_record(name):
    est = _fit_behind_a_scaler(name)
    reports = _records(est)
    assert reports
    for report in reports:
        assert report.status == "none"
        assert report.status_line.startswith("NOT PRIVATE: fitted in a scikit-learn Pipeline")
        assert "'standardscaler' (StandardScaler)" in report.status_line
        assert "CERTIFIED" not in report.status_line
        assert {n.status for n in report.nodes} == {"none"}
    privacy = getattr(est, "privacy_", None)  # the protocols' summary (vertical, federated)
    if privacy is not None:
        assert privacy["status"] == "none" and "StandardScaler" in privacy["not_private"]


@pytest.fixture(scope="module")
def behind():
    return _fit_behind_a_scaler("AdaSSPRegression")


def test_every_rendering_says_not_private(behind):
    report = behind.privacy_report_
    for text in (report.summary(), report.to_markdown(), report.to_html()):
        assert "NOT PRIVATE: fitted in a scikit-learn Pipeline" in text and "CERTIFIED" not in text
    assert "class='status none'" in report.to_html()
    data = json.loads(report.to_json())
    assert data["status"] == "none" and data["status_line"] == report.status_line
    assert any(note.startswith("not private: fitted in a scikit-learn Pipeline") for note in data["notes"])
    assert PrivacyReport.from_json(report.to_json()) == report


def test_a_saved_and_reloaded_model_and_the_cli_keep_the_label(behind, tmp_path):
    path = tmp_path / "model.json"
    behind.save(path)
    loaded = load_model(path)
    assert loaded.privacy_report_.status == "none"
    assert loaded.privacy_report_.status_line == behind.privacy_report_.status_line
    report_file = tmp_path / "report.json"
    report_file.write_text(loaded.privacy_report_.to_json())
    done = run_cli("report", report_file, "--markdown", tmp_path / "report.md")
    assert done.returncode == 0, done.stderr
    assert "NOT PRIVATE: fitted in a scikit-learn Pipeline" in (tmp_path / "report.md").read_text()
    shown = run_cli("report", report_file)
    assert shown.stdout.startswith("NOT PRIVATE: fitted in a scikit-learn Pipeline")


def test_relabelling_is_idempotent_and_keeps_an_earlier_reason(behind):
    report = behind.privacy_report_
    assert report.not_private("fitted in a scikit-learn Pipeline") is not report
    again = report.not_private(report.notes[-1][len("not private: "):])
    assert again is report
    other = report.not_private("another reason")
    assert other.status_line.startswith("NOT PRIVATE: another reason; fitted in a scikit-learn Pipeline")


def test_the_same_estimator_is_certified_outside_a_pipeline_and_behind_public_steps():
    """Passes on main too: the relabelling must not touch a fit that keeps its guarantee."""
    X, y = _rows()
    alone = AdaSSPRegression(bound_x=3.0, bound_y=5.0, budget=B, random_state=0).fit(X, y)
    assert alone.privacy_report_.status == "certified" and alone.privacy_report_.status_line.startswith("CERTIFIED")
    public = make_pipeline(PublicRangeScaler(-3.0, 3.0), DPStandardScaler(bound=1.0, budget=B, random_state=0),
                           AdaSSPRegression(bound_x=3.0, bound_y=5.0, budget=B, random_state=0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", NonPrivatePreprocessingWarning)
        public.fit(X, y)
    assert public[-1].privacy_report_.status == "certified"
    assert public[1].privacy_report_.status == "certified"


def test_a_private_step_before_the_reading_step_keeps_its_label():
    """Passes on main too: only the estimators after a row-reading step lose the label."""
    X, y = _rows()
    pipe = make_pipeline(DPStandardScaler(bound=3.0, budget=B, random_state=0), StandardScaler(),
                         AdaSSPRegression(bound_x=3.0, bound_y=5.0, budget=B, random_state=0))
    with pytest.warns(NonPrivatePreprocessingWarning):
        pipe.fit(X, y)
    assert pipe[0].privacy_report_.status == "certified"
    assert pipe[-1].privacy_report_.status == "none"
