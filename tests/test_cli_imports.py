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

from privsdr.cli import main


def _python(code: str, cwd: Path) -> str:
    """Run ``code`` in a fresh interpreter (bounded time) and return its stdout; fail with its stderr."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("parties, flags", [
    (["alice=2", "bob=2"], []),  # auto: one helper for two data parties
    (["alice=1", "bob=1", "carol=2"], []),  # auto: no helper for three
    (["alice=1", "bob=1", "carol=2"], ["--helper", "yes", "--colluders", "1"]),
])
def test_secure_keys_of_a_vertical_config_orders_the_parties_as_the_estimator_without_importing_scikit_learn(tmp_path, parties, flags):
    cfg = tmp_path / "shared.json"
    assert main(["vertical", "config", str(cfg), "--secure", "--party", *parties, "--rows", "300", "--label", "alice",
                 "--epsilon", "1", "--row-bound", "4", "--label-bound", "6", *flags]) == 0
    out = _python(f"""
        import json, sys
        from privsdr.cli import main
        assert main(["secure", "keys", "keys", "--config", {str(cfg)!r}]) == 0
        heavy = [m for m in ("sklearn", "pandas", "scipy.stats") if m in sys.modules]
        print(json.dumps(heavy))
        """, tmp_path)
    assert json.loads(out.strip().splitlines()[-1]) == []
    from privsdr.cli.vertical_secure import _estimator, read_config

    shared = read_config(str(cfg))
    expected = _estimator(shared["estimator"], shared["budget"], None).parties_for(shared["layout"])
    made = {name: sorted(p.name for p in (tmp_path / "keys" / name).glob("party_*.crt")) for name in expected}
    assert made == {name: [f"party_{i}.crt"] for i, name in enumerate(expected)}  # MPyC index i = the estimator's order


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
