"""What a data-protection officer files (issue 25, item 7): the privacy unit in plain language, the purpose, the
data set's digest and the released estimate, in every rendering of the report."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from privsdr import DPSIR, Budget, PrivacyReport
from privsdr.report import PLAIN_UNITS, released_estimate


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (500, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=500)
    return DPSIR(n_directions=1, bound=1.0, cut_points=[-0.5, 0.0, 0.5], budget=Budget(2.0, 1e-6), random_state=0).fit(X, y)


def test_the_unit_is_stated_in_plain_language_in_every_rendering(fitted):
    report = fitted.privacy_report_
    assert report.unit == PLAIN_UNITS["replace_one"] and "replaced by another" in report.unit
    assert report.unit in report.to_markdown()
    assert "one cell of one person" in PLAIN_UNITS["replace_entry"] and "added or removed" in PLAIN_UNITS["add_remove"]


def test_with_filing_adds_purpose_digest_and_estimate_and_round_trips(fitted):
    report = fitted.privacy_report_.with_filing(purpose="quarterly release", data_file="rows.csv", data_sha256="ab" * 32,
                                                estimate=released_estimate(fitted))
    again = PrivacyReport.from_json(report.to_json())
    assert again == report
    filing = again.filing
    assert filing["purpose"] == "quarterly release" and filing["data"]["sha256"] == "ab" * 32
    assert "not covered by the privacy guarantee" in filing["data"]["note"]
    assert np.array_equal(np.asarray(filing["estimate"]["directions_"]), fitted.directions_)
    assert set(filing["estimate"]) >= {"directions_", "eigenvalues_", "cut_points_"}
    text = report.to_markdown()
    assert "## Filing" in text and "quarterly release" in text and "released: directions_" in text
    assert fitted.privacy_report_.filing is None and "filing" not in fitted.privacy_report_.to_dict()  # unchanged


def test_cli_fit_files_the_estimate_the_digest_and_the_purpose(cli, sir_table, tmp_path):
    out = tmp_path / "report.json"
    plain = cli("fit", "dpsir", "--data", sir_table, "--target", "y", "--bound", 1, "--cut-points", -1, 0, 1,
                "--epsilon", 2, "--delta", 1e-6, "--seed", 0, "--report", tmp_path / "plain.json")
    assert plain.code == 0, plain.err  # the digest is opt-in: it identifies the data exactly and no noise covers it
    assert json.loads((tmp_path / "plain.json").read_text())["filing"]["data"] == {"file": sir_table.name}
    result = cli("fit", "dpsir", "--data", sir_table, "--target", "y", "--bound", 1, "--cut-points", -1, 0, 1,
                 "--epsilon", 2, "--delta", 1e-6, "--seed", 0, "--report", out, "--purpose", "method comparison",
                 "--data-digest", "--out", tmp_path / "model.json")
    assert result.code == 0, result.err
    filing = json.loads(out.read_text())["filing"]
    assert filing["purpose"] == "method comparison"
    assert filing["data"] == {"file": sir_table.name, "sha256": hashlib.sha256(sir_table.read_bytes()).hexdigest(),
                              "note": filing["data"]["note"]}
    model = json.loads((tmp_path / "model.json").read_text())
    stored = model["fitted"]["directions_"]["$array"]
    assert np.array_equal(np.reshape(stored["data"], stored["shape"]), filing["estimate"]["directions_"])
