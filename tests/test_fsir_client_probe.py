"""An FSIR client's releases (slice proportions, slice means, second moment: Gram blocks of ``privsdr.released.gram``)
probed through the production code (``client_message``) on extreme neighbours: every release's change stays within its
declared sensitivity and comes close to it, so a spec or a client that declares too little goes red here (issue 34:
the second moment's sensitivity had no test that a halved declaration failed)."""
import numpy as np

from privsdr import Budget
from privsdr.audit import probe_releases
from privsdr.federated import FSIRConfig, client_message

N, P = 6, 3
CONFIG = FSIRConfig(bound=1.0, norm="l2", cut_points=(0.0,), mechanism="iid", calibration="analytic")


def _neighbours() -> list[tuple[np.ndarray, np.ndarray]]:
    """One base set and its replace-one neighbours: the first row (norm 1, slice 0) replaced by orthogonal and opposite
    rows of norm 1, in the same slice and in the other one."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-0.4, 0.4, size=(N, P))
    X[0] = [1.0, 0.0, 0.0]
    y = np.where(np.arange(N) % 2 == 0, -1.0, 1.0)
    out = [(X, y)]
    for row in ([0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]):
        for label in (-1.0, 1.0):
            X1, y1 = X.copy(), y.copy()
            X1[0], y1[0] = row, label
            out.append((X1, y1))
    return out


def test_every_client_release_within_and_close_to_its_declared_sensitivity():
    datasets = _neighbours()

    def fit(D):
        return client_message(D[0], D[1], CONFIG, Budget(1.0, 1e-6), client_id="c", random_state=0)

    results = probe_releases(fit, datasets, [(0, i) for i in range(1, len(datasets))])
    assert set(results) == {"slice_proportions", "slice_means", "second_moment"}
    for node, result in results.items():
        assert result.passed, (node, result.summary())
        assert result.max_change >= 0.99 * result.declared, (node, result.summary())  # the extreme pairs attain it
