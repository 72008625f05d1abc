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
import pytest

from privsdr import Budget, Ledger, Plan, Sensitivity
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


HEAVY = ("sklearn", "pandas", "scipy.stats", "dp_accounting")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """One fresh interpreter runs the commands made lighter (one start for all of them), and reports which heavy
    modules it imported: ``secure keys --config`` of three configurations, the run a secure vertical party builds
    (``vertical party --secure``, ``vertical helper``) and ``ledger show`` of a basic journal."""
    folder = tmp_path_factory.mktemp("fresh")
    for tag, (parties, flags) in LAYOUTS.items():
        assert main(["vertical", "config", str(folder / f"{tag}.json"), "--secure", "--party", *parties, "--rows", "300",
                     "--label", "alice", "--epsilon", "1", "--row-bound", "4", "--label-bound", "6", *flags]) == 0
    ledger = Ledger(Budget(10.0, 1e-6), "basic", journal=folder / "basic.jsonl")
    plan = Plan("unit", "replace_one")
    plan.add("x", "gaussian", Sensitivity(1.0, "l2"), share=Budget(1.0, 1e-7))
    calibrated = plan.allocate(Budget(1.0, 1e-7))
    for _ in range(2):
        r = ledger.reserve(calibrated)
        r.charge("x")
        r.close({"algorithm": "unit", "status": "certified"})
    out = _python(f"""
        import contextlib, io, json, sys
        from privsdr.cli import main
        from privsdr.cli.vertical_secure import _estimator, read_config
        imported, before = {{}}, set()

        def heavy():  # what this step imported of HEAVY (the steps before it imported none, or their tests fail)
            now = {{m for m in {HEAVY!r} if m in sys.modules}}
            return sorted(now - before), now
        for tag in {sorted(LAYOUTS)!r}:
            assert main(["secure", "keys", "keys_" + tag, "--config", tag + ".json"]) == 0
        imported["keys"], before = heavy()
        shared = read_config("two.json")
        run = _estimator(shared["estimator"], shared["budget"], None, shared["accountant"])
        party = {{"parties": run.parties_for(shared["layout"]), "plan": run.build_plan({{"alice": 2, "bob": 2}}).public_dict()}}
        imported["party"], before = heavy()
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            assert main(["ledger", "show", "basic.jsonl", "--json"]) == 0
        imported["ledger"], before = heavy()
        print(json.dumps({{"imported": imported, "party": party, "ledger": json.loads(buffer.getvalue())}}, default=str))
        """, folder)
    return folder, json.loads(out.strip().splitlines()[-1])


def test_secure_keys_of_a_vertical_config_orders_the_parties_as_the_estimator_without_importing_scikit_learn(fresh):
    """One fresh process makes the keys of three configurations (a helper or none): the folders follow
    ``SecureVerticalRegression.parties_for`` (MPyC index i = the i-th party), and scikit-learn was never imported."""
    folder, got = fresh
    assert got["imported"]["keys"] == []
    from privsdr.cli.vertical_secure import _helper, read_config
    from privsdr.vertical.secure_regression import SecureVerticalRegression

    for tag in LAYOUTS:
        shared = read_config(str(folder / f"{tag}.json"))
        expected = SecureVerticalRegression(**{**shared["estimator"], "helper": _helper(shared["estimator"])}).parties_for(shared["layout"])
        made = {name: sorted(p.name for p in (folder / f"keys_{tag}" / name).glob("party_*.crt")) for name in expected}
        assert made == {name: [f"party_{i}.crt"] for i, name in enumerate(expected)}, tag
    assert len(expected) == 4  # the last layout has its helper first


def test_a_secure_vertical_party_builds_its_run_without_importing_scikit_learn(fresh):
    """The run a party process builds (``vertical party --secure``, ``vertical helper``: ``vertical.secure_run``'s
    ``SecureRegressionRun``) imports no scikit-learn, and has the estimator's parties and plan
    (``SecureVerticalRegression``, built in this process from the same configuration)."""
    folder, got = fresh
    assert got["imported"]["party"] == []
    from privsdr.cli.vertical_secure import read_config
    from privsdr.vertical.secure_regression import SecureVerticalRegression

    shared = read_config(str(folder / "two.json"))
    est = SecureVerticalRegression(**{**shared["estimator"], "helper": "auto"}, budget=shared["budget"])
    plan = json.loads(json.dumps(est.build_plan({"alice": 2, "bob": 2}).public_dict(), default=str))
    assert got["party"] == {"parties": ["helper", "alice", "bob"], "plan": plan}


def test_ledger_show_of_a_basic_journal_does_not_import_dp_accounting(fresh, capsys):
    """A run's RDP curve (``filters.RunProfile.rdp``, which needs dp-accounting) is computed only under a rule that
    reads it: ``ledger show`` of a basic journal in a fresh process imports no dp-accounting and prints what this
    process prints."""
    folder, got = fresh
    assert got["imported"]["ledger"] == []
    assert main(["ledger", "show", str(folder / "basic.jsonl"), "--json"]) == 0
    assert got["ledger"] == {**json.loads(capsys.readouterr().out), "journal": "basic.jsonl"}


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
