"""What a fresh ``privsdr`` process imports (issue 35: speed). Every CLI line a page or a test starts is a new Python
process, so a module it imports but does not need costs its CPU every time: ``sklearn.base`` alone pulls in pandas
and scipy.stats (~1.4 s of CPU), scipy.stats alone ~0.6 s. Checked in subprocesses (a module already imported by
this test process would hide the import), with the numbers the lighter path gives compared to the heavier one's."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from privsdr.cli import main


def _python(code: str, cwd: Path) -> str:
    """Run ``code`` in a fresh interpreter (bounded time) and return its stdout; fail with its stderr."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


LAYOUTS = {
    "two": (["alice=2", "bob=2"], []),  # auto: one helper for two data parties
    "three": (["alice=1", "bob=1", "carol=2"], []),  # auto: no helper for three
    "three_helped": (["alice=1", "bob=1", "carol=2"], ["--helper", "yes", "--colluders", "1"]),
}


def test_secure_keys_of_a_vertical_config_orders_the_parties_as_the_estimator_without_importing_scikit_learn(tmp_path):
    """One fresh process makes the keys of three configurations (a helper or none): the folders follow
    ``SecureVerticalRegression.parties_for`` (MPyC index i = the i-th party), and scikit-learn was never imported."""
    for tag, (parties, flags) in LAYOUTS.items():
        assert main(["vertical", "config", str(tmp_path / f"{tag}.json"), "--secure", "--party", *parties, "--rows", "300",
                     "--label", "alice", "--epsilon", "1", "--row-bound", "4", "--label-bound", "6", *flags]) == 0
    out = _python(f"""
        import json, sys
        from privsdr.cli import main
        for tag in {sorted(LAYOUTS)!r}:
            assert main(["secure", "keys", "keys_" + tag, "--config", tag + ".json"]) == 0
        print(json.dumps([m for m in ("sklearn", "pandas", "scipy.stats") if m in sys.modules]))
        """, tmp_path)
    assert json.loads(out.strip().splitlines()[-1]) == []
    from privsdr.cli.vertical_secure import _estimator, read_config

    for tag in LAYOUTS:
        shared = read_config(str(tmp_path / f"{tag}.json"))
        expected = _estimator(shared["estimator"], shared["budget"], None).parties_for(shared["layout"])
        made = {name: sorted(p.name for p in (tmp_path / f"keys_{tag}" / name).glob("party_*.crt")) for name in expected}
        assert made == {name: [f"party_{i}.crt"] for i, name in enumerate(expected)}, tag
    assert len(expected) == 4  # the last layout has its helper first


def test_pride_held_out_test_is_scipy_stats_norm_sf_bit_for_bit():
    """``held_out_test``'s p = 1 - Phi(t) comes from scipy.special.ndtr(-t); scipy.stats.norm.sf(t) computes that very
    expression, so the doubles are equal (checked on a grid and on random t, tails, signed zeros and infinities)."""
    from scipy.stats import norm

    from privsdr.vertical.pride_steps import held_out_test

    rng = np.random.default_rng(7)
    t = np.concatenate([np.linspace(-40.0, 40.0, 40_001), 6.0 * rng.standard_normal(20_000),
                        [0.0, -0.0, 1e-300, -1e-300, 1e300, -1e300, np.inf, -np.inf]])
    from scipy.special import ndtr

    assert np.array_equal(ndtr(-t), norm.sf(t))
    for _ in range(50):  # and through the function itself, against the formula with norm.sf
        n = int(rng.integers(3, 200))
        y, pred = rng.standard_normal(n), rng.standard_normal(n) * rng.uniform(0.0, 2.0)
        yc = y - y.mean()
        d = yc**2 - (yc - pred) ** 2
        assert held_out_test(y, pred)[0] == float(norm.sf(d.mean() * np.sqrt(n) / d.std(ddof=1)))


def test_pride_held_out_test_does_not_import_scipy_stats(tmp_path):
    out = _python("""
        import sys
        import numpy as np
        from privsdr.vertical.pride_steps import held_out_test
        rng = np.random.default_rng(0)
        held_out_test(rng.standard_normal(50), rng.standard_normal(50))
        print("scipy.stats" in sys.modules)
        """, tmp_path)
    assert out.strip().splitlines()[-1] == "False"


def test_a_secure_vertical_party_builds_and_prices_its_run_without_importing_scikit_learn(tmp_path):
    """``vertical config --secure`` and the run a party process builds (``vertical party --secure``, ``vertical
    helper``: ``vertical.secure_run.SecureRegressionRun``) in a fresh process import no scikit-learn, and give the
    estimator's parties, plan and price (``SecureVerticalRegression``, in this process)."""
    from privsdr.vertical.secure_regression import SecureVerticalRegression

    out = _python("""
        import json, sys
        from privsdr.cli import main
        from privsdr.cli.vertical_secure import _estimator, read_config
        assert main(["vertical", "config", "shared.json", "--secure", "--party", "alice=2", "bob=3", "--rows", "300",
                     "--label", "alice", "--epsilon", "1", "--row-bound", "4", "--label-bound", "6"]) == 0
        shared = read_config("shared.json")
        run = _estimator(shared["estimator"], shared["budget"], None, shared["accountant"])
        cost = run.plan({"alice": 2, "bob": 3}).cost()
        print(json.dumps({"parties": run.parties_for(shared["layout"]), "cost": [cost.epsilon, cost.delta],
                          "heavy": [m for m in ("sklearn", "pandas") if m in sys.modules]}))
        """, tmp_path)
    got = json.loads(out.strip().splitlines()[-1])
    assert got["heavy"] == []
    from privsdr import Budget
    from privsdr.cli.vertical_secure import read_config

    shared = read_config(str(tmp_path / "shared.json"))
    est = SecureVerticalRegression(row_bound=4.0, label_bound=6.0, budget=Budget(1.0, shared["budget"].delta),
                                   accountant=shared["accountant"])
    cost = est.plan({"alice": 2, "bob": 3}).cost()
    assert got["parties"] == est.parties_for(shared["layout"]) == ["helper", "alice", "bob"]
    assert got["cost"] == [cost.epsilon, cost.delta]


def test_ledger_show_of_a_basic_journal_does_not_import_dp_accounting(tmp_path, capsys):
    """A run's RDP curve (``filters.RunProfile.rdp``, which needs dp-accounting) is computed only under a rule that
    reads it: ``ledger show`` of a basic journal in a fresh process imports no dp-accounting and prints what this
    process prints; a best journal's show does import it (its rule reads the curve)."""
    from privsdr import Budget, Ledger, Plan, Sensitivity

    for accountant in ("basic", "best"):
        ledger = Ledger(Budget(10.0, 1e-6), accountant, journal=tmp_path / f"{accountant}.jsonl")
        plan = Plan("unit", "replace_one")
        plan.add("x", "gaussian", Sensitivity(1.0, "l2"), share=Budget(1.0, 1e-7))
        calibrated = plan.allocate(Budget(1.0, 1e-7))
        for _ in range(2):
            r = ledger.reserve(calibrated)
            r.charge("x")
            r.close({"algorithm": "unit", "status": "certified"})
    out = _python("""
        import io, json, sys, contextlib
        from privsdr.cli import main
        shown = {}
        for accountant in ("basic", "best"):
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                assert main(["ledger", "show", accountant + ".jsonl", "--json"]) == 0
            shown[accountant] = [json.loads(buffer.getvalue()), "dp_accounting" in sys.modules]
        print(json.dumps(shown))
        """, tmp_path)
    got = json.loads(out.strip().splitlines()[-1])
    assert got["basic"][1] is False and got["best"][1] is True
    for accountant in ("basic", "best"):
        assert main(["ledger", "show", str(tmp_path / f"{accountant}.jsonl"), "--json"]) == 0
        here = json.loads(capsys.readouterr().out)
        assert got[accountant][0] == {**here, "journal": f"{accountant}.jsonl"}, accountant
