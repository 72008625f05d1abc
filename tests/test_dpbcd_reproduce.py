"""DP-BCD reproductions: the paper's values, both modes beside them, files written, determinism."""
import csv

import numpy as np
import pytest

from privsdr.accounting import Budget
from privsdr.core import bcd_offset_form
from privsdr.reproduce import REPRODUCTIONS, dpbcd_realdata, dpbcd_tables


def test_registered_and_paper_values_are_the_published_ones():
    for name in ("dpbcd-table1", "dpbcd-table2", "dpbcd-table5", "dpbcd-forestfires", "dpbcd-productivity"):
        assert name in REPRODUCTIONS
    assert dpbcd_tables.TABLE1_PAPER[2.0] == (3.08, 0.47)  # reconstructed (columns un-swapped, total eps)
    assert dpbcd_tables.TABLE2_PAPER[3.0] == (7.87, 1.18)
    assert dpbcd_tables.TABLE5_PAPER[10000] == (0.59, 0.15)


def test_table_cells_run_write_and_repeat(tmp_path):
    rows = dpbcd_tables.run("dpbcd-table5", reps=2, levels=[250, 5000], secure_reps=0)  # the secure column: below
    assert {r["mode"] for r in rows} == {"paper", "certified"}
    by = {(r["N"], r["mode"]): r for r in rows}
    assert by[(250, "paper")]["paper_median"] == 0.95 and by[(250, "certified")]["paper_median"] is None
    assert by[(5000, "paper")]["median"] < by[(250, "paper")]["median"]  # error falls with N
    again = dpbcd_tables.run("dpbcd-table5", reps=2, levels=[250, 5000], secure_reps=0)
    assert [r["median"] for r in rows] == [r["median"] for r in again]
    csv_path, md_path = dpbcd_tables.write(rows, tmp_path)
    with open(csv_path) as fh:
        assert len(list(csv.DictReader(fh))) == 4
    assert "the paper: mean / median" in md_path.read_text()
    gamma = dpbcd_tables.run("dpbcd-table2", reps=1, levels=[1.15, 3.0], secure_reps=0)
    cert = [r["median"] for r in gamma if r["mode"] == "certified"]
    assert cert[0] == cert[1]  # certified mode has no gamma: one fit per data set, repeated


def test_secure_column_beside_the_paper(tmp_path, monkeypatch):
    """Issue 33: SecureVerticalRegression at the same (eps, 1e-6) on the same data sets, beside the published numbers.
    One secure fit (three MPyC processes on 127.0.0.1, about a second): Table 2 at two gammas shares it, as certified."""
    pytest.importorskip("mpyc")
    budgets = []

    class Recorded(dpbcd_tables.SecureVerticalRegression):
        def fit(self, X, y=None):
            budgets.append(self.budget)
            return super().fit(X, y)

    monkeypatch.setattr(dpbcd_tables, "SecureVerticalRegression", Recorded)
    rows = dpbcd_tables.run("dpbcd-table2", reps=1, levels=[1.15, 3.0], secure_reps=1)
    assert budgets == [Budget(2.0, 1e-6)]  # the same nominal (eps, delta) as the table's other columns, one fit
    secure = [r for r in rows if r["mode"] == "secure"]
    assert len(secure) == 2 and all(r["reps"] == 1 and r["paper_median"] is None for r in secure)
    assert secure[0]["median"] == secure[1]["median"]  # no gamma: one fit per data set, repeated
    # the central release at eps = 2, N = 1000 estimates the coefficients (the trivial zero estimate has AAPD 1; measured
    # 0.45 at rep 0, and its noise is drawn by the parties from the OS CSPRNG, so the bound is loose)
    assert 0 < secure[0]["median"] < 0.9
    text = dpbcd_tables.write(rows, tmp_path)[1].read_text()
    assert "secure (delta = 1e-6): mean / median (replications)" in text and "secure median / the paper's median" in text
    ratio = secure[0]["median"] / dpbcd_tables.TABLE2_PAPER[1.15][1]
    assert f"({1}) | {ratio:.2f} |" in text.splitlines()[4]


def test_secure_replications_per_level():
    counts = dpbcd_tables.secure_counts([1000, 100_000], (100_000,), reps=100, secure_reps=None)
    assert counts == {1000: dpbcd_tables.SECURE_REPS, 100_000: dpbcd_tables.SECURE_EXTENSION_REPS}
    assert dpbcd_tables.secure_counts([1000], (), reps=2, secure_reps=None) == {1000: 2}  # never more than reps
    assert dpbcd_tables.secure_counts([1000], (), reps=5, secure_reps=0) == {1000: 0}
    with pytest.raises(ValueError, match="secure_reps"):
        dpbcd_tables.secure_counts([1000], (), reps=5, secure_reps=-1)


def test_real_data_figure_and_tables(tmp_path):
    rows = dpbcd_realdata.run("dpbcd-productivity", reps=1)
    # issue 25: scored against the reference it prints, non-private BCD after the same T = 5 rounds (R^2 0.241, the
    # paper's "centralized 0.24"), with OLS (0.272) beside it for information
    reference = rows[0]
    assert reference["mode"] == "reference" and abs(reference["median"] - 0.2408) < 1e-3 and abs(reference["ols"] - 0.2718) < 1e-3
    data = dpbcd_realdata.load("dpbcd-productivity")
    bcd5 = bcd_offset_form(list(data.blocks), data.y, 5)  # the authors' form of the iteration
    ols = np.linalg.lstsq(data.X, data.y, rcond=None)[0]
    coef = [r for r in rows if r["kind"] == "coef"]
    assert {r["mode"] for r in coef} == {"paper", "certified"} and {r["eps"] for r in coef} == {1.0, 10.0}
    assert len({r["column"] for r in coef}) == 17
    first = coef[:17]
    assert np.allclose([r["reference"] for r in first], bcd5, rtol=1e-8, atol=1e-12)
    assert np.allclose([r["ols"] for r in first], ols, rtol=1e-8, atol=1e-12)
    assert all(r["reference"] == reference["reference"] for r in rows if r["kind"] == "r2")
    _, md = dpbcd_realdata.write(rows, tmp_path)
    assert (tmp_path / "dpbcd-productivity.png").stat().st_size > 10_000
    text = md.read_text()
    assert "reference (non-private BCD after T = 5 rounds" in text and "R^2 0.2408" in text and "OLS (BCD converged" in text
    scales = dpbcd_realdata.public_scales("dpbcd-forestfires", dpbcd_realdata.load("dpbcd-forestfires"))
    assert scales[1].tolist() == [101.0, 400.0, 1000.0, 60.0] and np.all(scales[0][6:] == 1.0)  # dummies: 1
