"""privsdr fit sparse-dpsir / sparse-pca: the sparse estimators from a CSV, with the selected columns named."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import run_cli

from privsdr import Ledger


@pytest.fixture()
def wide(tmp_path):
    """40 columns, y depends on g0..g2 only."""
    rng = np.random.default_rng(0)
    n, p = 3000, 40
    X = rng.uniform(-1, 1, (n, p))
    y = X[:, :3].sum(axis=1) / np.sqrt(3) + 0.1 * rng.standard_normal(n)
    path = tmp_path / "wide.csv"
    names = [f"g{j}" for j in range(p)]
    path.write_text(",".join([*names, "y"]) + "\n" + "\n".join(",".join(f"{v:.4f}" for v in (*r, t)) for r, t in zip(X, y, strict=True)) + "\n")
    return path


def test_sparse_dpsir_names_the_selected_columns_and_writes_a_model(wide, tmp_path):
    model, out_csv = tmp_path / "m.json", tmp_path / "z.csv"
    out = run_cli("fit", "sparse-dpsir", "--data", wide, "--target", "y", "--bound", 1, "--sparsity", 3, "--cut-points", -0.5, 0, 0.5,
                  "--epsilon", 8, "--delta", 1e-6, "--seed", 0, "--out", model)
    assert out.returncode == 0, out.stderr
    assert "selected columns: g0, g1, g2" in out.stdout and out.stdout.count("CERTIFIED") == 1
    rows = out.stdout.split("(the others are 0):\n")[1].splitlines()[:3]
    assert [r.split()[0] for r in rows] == ["g0", "g1", "g2"]
    assert "the noise alone moves these directions by about" in out.stdout  # the moments design's diagnostic
    done = run_cli("transform", "--model", model, "--data", wide, "--out", out_csv)
    assert done.returncode == 0, done.stderr
    paper = run_cli("fit", "sparse-dpsir", "--data", wide, "--target", "y", "--bound", 1, "--sparsity", 3, "--cut-points", -0.5, 0,
                    0.5, "--epsilon", 8, "--delta", 1e-6, "--seed", 0, "--algorithm", "onepass")
    assert paper.returncode == 0 and "selected columns: " in paper.stdout, paper.stderr


def test_sparse_pca_runs_on_the_named_columns(wide):
    out = run_cli("fit", "sparse-pca", "--data", wide, "--columns", "g0", "g1", "g2", "g3", "--bound", 1, "--sparsity", 2,
                  "--epsilon", 4, "--delta", 1e-6, "--seed", 0)
    assert out.returncode == 0, out.stderr
    assert "selected columns: " in out.stdout and len(out.stdout.split("selected columns: ")[1].splitlines()[0].split(", ")) <= 2


@pytest.mark.parametrize("method, args, message", [
    ("sparse-dpsir", ["--target", "y", "--bound", 1, "--cut-points", 0], "--sparsity"),
    ("sparse-dpsir", ["--target", "y", "--sparsity", 3, "--cut-points", 0], "--bound"),
    ("sparse-pca", ["--bound", 1], "--sparsity"),
    ("sparse-pca", ["--sparsity", 2, "--clip", 1], "does not apply"),
])
def test_missing_or_foreign_options_are_refused_before_anything_is_charged(wide, tmp_path, method, args, message):
    journal = tmp_path / "j.jsonl"
    assert run_cli("ledger", "init", journal, "--epsilon", 5, "--delta", 1e-5).returncode == 0
    out = run_cli("fit", method, "--data", wide, *args, "--journal", journal)
    assert out.returncode == 2 and message in out.stderr
    assert Ledger.open(journal).spent.epsilon == 0.0


def test_dpsir_on_wide_data_points_to_the_command_that_can_fit_it(wide, tmp_path):
    short = tmp_path / "short.csv"
    short.write_text("\n".join(wide.read_text().splitlines()[:61]) + "\n")  # 60 rows, 40 columns: p >= n/2
    out = run_cli("fit", "dpsir", "--data", short, "--target", "y", "--bound", 1, "--cut-points", 0, "--epsilon", 1, "--delta", 1e-6)
    assert out.returncode == 2 and "privsdr fit sparse-dpsir" in out.stderr
