"""Issue 16 item 3: fits on data larger than memory. The sums-over-rows estimators accept ``privsdr.Chunks``
(an iterable of row chunks) and dask arrays (reduced on a Dask ``LocalCluster`` here); with the noise off
they give the in-memory result to 1e-10, with the same seed the same noisy result, and the same privacy
report; bad data in any chunk is refused before anything is charged; a generator over 10^7 rows never
holds more than a few chunks in memory."""
from __future__ import annotations

import io
import sys
import tracemalloc
import warnings

import numpy as np
import pytest

from privsdr import DPPLS, DPSIR, Budget, Chunks, DPMeanCovariance, Ledger, ValidationError
from privsdr.algorithms import MSC

N, P = 3000, 5
CUTS = [-1.0, 0.0, 1.0]
GRID = np.linspace(-3.0, 3.0, 25)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, P))
    y = X @ np.array([1.0, -1.0, 0.5, 0.0, 0.0]) + 0.3 * rng.standard_normal(N)
    return X, y


def _chunks(X, y=None, size=700):
    """A re-readable source of row chunks (uneven: the last chunk is shorter)."""
    def read():
        for start in range(0, len(X), size):
            yield (X[start:start + size], y[start:start + size]) if y is not None else X[start:start + size]
    return Chunks(read)


def _estimators(budget):
    """(name, factory, needs y, what to compare) for every estimator with a chunked fit."""
    return [
        ("DPSIR cut points", lambda: DPSIR(2, bound=2.5, cut_points=CUTS, budget=budget, random_state=1), True, "directions_"),
        ("DPSIR y grid", lambda: DPSIR(2, bound=[2.5] * 4 + [1.5], y_grid=GRID, center=np.full(P, 0.1), budget=budget,
                                       random_state=1), True, "directions_"),
        ("DPMeanCovariance", lambda: DPMeanCovariance(clip=3.0, budget=budget, random_state=1), False, "covariance_"),
        ("DPPLS", lambda: DPPLS(2, bound_x=4.0, bound_y=5.0, x_center=0.05, budget=budget, random_state=1), True, "coef_"),
        ("MSC", lambda: MSC(bound=4.0, budget=budget, random_state=1), False, "reference_"),
    ]


def _report(est):
    d = est.privacy_report_.to_dict()
    return {k: v for k, v in d.items() if k not in ("run_id", "timestamps", "diagnostics")}


def _fit(make, X, y, with_y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # noise diagnostics
        return make().fit(X, y) if with_y else make().fit(X)


def _assert_same_fit(a, b, attr, tol):
    assert np.max(np.abs(np.asarray(getattr(a, attr)) - np.asarray(getattr(b, attr)))) <= tol
    assert _report(a) == _report(b)
    # the shape is public under replace-one; under add/remove (DPPLS, MSC) n is not, and the report leaves it out
    assert a.privacy_report_.data_shape == ([N, P] if a.privacy_report_.relation == "replace_one" else None)


@pytest.mark.parametrize("budget", [Budget.infinite(), Budget(1.0, 1e-5)], ids=["noise off", "noise on, same seed"])
@pytest.mark.parametrize("case", range(5), ids=[e[0] for e in _estimators(Budget(1.0, 1e-5))])
def test_chunks_give_the_in_memory_fit(data, case, budget):
    X, y = data
    name, make, with_y, attr = _estimators(budget)[case]
    memory = _fit(make, X, y, with_y)
    chunked = _fit(make, _chunks(X, y if with_y else None), None, False)
    _assert_same_fit(memory, chunked, attr, 1e-10)


@pytest.fixture(scope="module")
def _local_cluster():
    """One worker process (the tasks, their data and their exceptions cross a process boundary, as on a real cluster;
    each worker spawns a fresh interpreter that imports distributed and privsdr's estimators, ~3 s of CPU), for this
    module's tests only: its scheduler's threads run in the test process, and a cluster left up for the session kept
    them working (and allocating, inside other tests' tracemalloc windows) until the end. Keep this module's cluster
    tests out of conftest's LONGEST_FIRST, so that they run together and the cluster starts once. Not the default
    client: dask arrays in other tests keep dask's own scheduler."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        yield client


@pytest.fixture
def cluster_client(_local_cluster):
    """The cluster's client as dask's scheduler for this test only."""
    with _local_cluster.as_current():
        yield _local_cluster


@pytest.mark.parametrize("budget", [Budget.infinite(), Budget(1.0, 1e-5)], ids=["noise off", "noise on, same seed"])
def test_dask_arrays_on_a_local_cluster_give_the_in_memory_fit(data, cluster_client, budget):
    """Each row chunk is validated, clipped and summed on a worker process; the driver adds the sums and the
    noise. X is chunked along its columns too (rechunked so that rows are whole), y with other row chunks."""
    da = pytest.importorskip("dask.array")
    X, y = data
    Xd, yd = da.from_array(X, chunks=(640, 3)), da.from_array(y, chunks=900)
    for _name, make, with_y, attr in _estimators(budget):
        memory = _fit(make, X, y, with_y)
        on_dask = _fit(make, Xd, yd, with_y) if with_y else _fit(make, Xd, None, False)
        _assert_same_fit(memory, on_dask, attr, 1e-10)


def test_bad_data_in_a_late_chunk_is_refused_before_anything_is_charged(data, cluster_client):
    da = pytest.importorskip("dask.array")
    X, y = data
    Xbad = X.copy()
    Xbad[2900, 3] = np.nan  # in the last chunk
    for source, target in ((_chunks(Xbad, y), None), (da.from_array(Xbad, chunks=(500, P)), da.from_array(y, chunks=500))):
        ledger = Ledger(Budget(1.0, 1e-5))
        with pytest.raises(ValidationError, match="NaN"):
            DPSIR(1, bound=2.5, y_grid=GRID, ledger=ledger, random_state=0).fit(source, target)
        assert ledger.spent.epsilon == 0.0 and not ledger.runs
    ledger = Ledger(Budget(1.0, 1e-5))
    short = Chunks(lambda: iter([(X[:10], y[:9])]))
    with pytest.raises(ValidationError, match="9 values for 10 rows"):
        DPPLS(1, bound_x=1.0, bound_y=1.0, ledger=ledger).fit(short)
    assert not ledger.runs


def test_refusals_on_the_source_itself_spend_nothing(data):
    X, y = data
    ledger = Ledger(Budget(1.0, 1e-5))
    once = Chunks(iter([(X[:500], y[:500]), (X[500:], y[500:])]))  # a one-shot iterator
    with pytest.raises(ValidationError, match="reads the rows twice"):
        DPSIR(1, bound=2.5, y_grid=GRID, ledger=ledger).fit(once)
    with pytest.raises(ValidationError, match="n_rows=2999"):
        DPSIR(1, bound=2.5, cut_points=CUTS, ledger=ledger).fit(Chunks(_chunks(X, y).source, n_rows=2999))
    with pytest.raises(ValidationError, match="algorithm='moments'"):
        DPSIR(1, bound=2.5, cut_points=CUTS, algorithm="onepass", ledger=ledger).fit(_chunks(X, y))
    with pytest.raises(ValidationError, match="mode='certified'"):
        DPPLS(1, mode="certified_iterative", bound_x=1.0, bound_y=1.0, ledger=Ledger(Budget(1.0, 1e-5))).fit(_chunks(X, y))
    with pytest.raises(ValidationError, match="different numbers of columns"):
        DPMeanCovariance(clip=1.0, ledger=ledger).fit(Chunks([X[:10], X[10:20, :3]]))
    assert not ledger.runs and ledger.spent.epsilon == 0.0
    one_pass = Chunks(iter([(X, y)]))  # read once: a fit with public cut points needs one pass only
    DPSIR(1, bound=2.5, cut_points=CUTS, budget=Budget(1.0, 1e-5), random_state=0, diagnose_noise=False).fit(one_pass)
    with pytest.raises(ValidationError, match="already read"):
        list(one_pass)


def test_a_generator_over_millions_of_rows_never_holds_more_than_a_few_chunks():
    """3 10^6 rows x 5 (120 MB as one array) read in 10^5-row chunks (4 MB each): the fit's peak of traced memory
    (numpy buffers included) stays below 5 chunks, and the estimate is the model's direction."""
    n, chunk, p = 3 * 10**6, 10**5, 5
    beta = np.ones(p) / np.sqrt(p)

    def rows():
        rng = np.random.default_rng(0)
        for _ in range(n // chunk):
            Xc = rng.standard_normal((chunk, p))
            yield Xc, Xc @ beta + 0.5 * rng.standard_normal(chunk)

    tracemalloc.start()
    try:
        est = DPSIR(1, bound=3.0, cut_points=CUTS, budget=Budget(1.0, 1e-6), random_state=0, diagnose_noise=False)
        est.fit(Chunks(rows()))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    chunk_bytes = chunk * p * 8
    assert peak < 5 * chunk_bytes, f"peak {peak / 1e6:.1f} MB for {chunk_bytes / 1e6:.1f} MB chunks"
    assert est.privacy_report_.data_shape == [n, p]
    assert abs(float(est.directions_[:, 0] @ beta)) > 0.99


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_shows_a_progress_bar_and_a_pipe_does_not(data, monkeypatch):
    X, y = data
    for stream, shown in ((_Tty(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stream)
        DPSIR(1, bound=2.5, cut_points=CUTS, budget=Budget(1.0, 1e-5), random_state=0, diagnose_noise=False).fit(_chunks(X, y))
        assert ("DPSIR: sums" in stream.getvalue()) is shown


# -- privacy of the chunked path: sensitivity probes and an audit ----------------------------------------------
def _neighbours(n=24, p=3, c=1.0, relation="replace_one"):
    """Record 10 (in the middle chunk of three) replaced by box corners with responses in every slice
    (replace-one), or added at that position (add/remove)."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-c, c, (n, p))
    y = rng.choice([-8.0, -3.0, 3.0, 8.0], n)
    out = []
    for corner in ([3 * c] * p, [-3 * c] * p, [3 * c] + [-3 * c] * (p - 1), [0.0] * p):  # outside the bounds: clipped
        for v in (-8.0, -3.0, 3.0, 8.0):
            if relation == "replace_one":
                X1, y1 = X.copy(), y.copy()
                X1[10], y1[10] = corner, v
            else:
                X1, y1 = np.insert(X, 10, corner, axis=0), np.insert(y, 10, v)
            out.append((X1, y1))
    return out, (X, y)


def _chunked_total(fn, X, y, with_y=True):
    from privsdr.rows import reduce_rows

    return reduce_rows(_chunks(X, y if with_y else None, size=8), None, fn, with_y=with_y)


def _probe_all(queries, nodes, pairs, mechanisms):
    from privsdr.audit import probe_sensitivity

    for name, query in queries.items():
        result = probe_sensitivity(query, pairs, nodes[name].sensitivity, mechanism=mechanisms.get(name, "gaussian"))
        assert result.passed, (name, result.summary())
        assert result.max_change >= 0.5 * nodes[name].sensitivity.value, (name, result.summary())  # the pairs come close


def test_probe_the_chunked_sums_against_the_declared_plans():
    """The statistics as the chunked path computes them (clipped inside each chunk of 8 rows, summed over chunks)
    move by at most each node's declared sensitivity when one record changes (replace-one) or is added (add/remove)."""
    from functools import partial

    from privsdr.algorithms._pls_queries import chunk_ssp
    from privsdr.algorithms.mean_covariance import chunk_moments
    from privsdr.algorithms.sir_moments import chunk_sums

    data, _ = _neighbours()
    n, p = data[0][0].shape
    pairs = [(a, b) for a in range(len(data)) for b in range(a + 1, len(data))]
    nodes = DPSIR(1, bound=1.0, cut_points=CUTS, budget=Budget(1.0, 1e-6)).plan(n, p).nodes
    sir = [_chunked_total(partial(chunk_sums, cuts=np.asarray(CUTS), bound=1.0, center=None), X, y) for X, y in data]
    _probe_all({"slice_sums": lambda i: sir[i]["slice_sums"] / n, "slice_counts": lambda i: sir[i]["counts"] / n,
                "second_moment": lambda i: sir[i]["xtx"] / n}, nodes, pairs, {"second_moment": "symmetric_gaussian"})
    nodes = DPMeanCovariance(clip=1.0, budget=Budget(1.0, 1e-6)).plan(n, p).nodes
    mc = [_chunked_total(partial(chunk_moments, clip=1.0), X, None, with_y=False) for X, _ in data]
    _probe_all({"mean": lambda i: mc[i]["x_sum"] / n, "second_moment": lambda i: mc[i]["xtx"] / n}, nodes, pairs,
               {"second_moment": "symmetric_gaussian"})
    added, (X0, y0) = _neighbours(relation="add_remove")
    nodes = DPPLS(1, bound_x=1.0, bound_y=2.0, budget=Budget(1.0, 1e-6)).plan(n, p).nodes
    fn = partial(chunk_ssp, x_center=None, y_center=0.0, bound_x=1.0, bound_y=2.0)
    stats = [_chunked_total(fn, X0, y0)] + [_chunked_total(fn, X, y) for X, y in added]  # 0: without the record
    _probe_all({name: (lambda i, name=name: stats[i][name]) for name in ("count", "x_sum", "y_sum", "xtx", "xty")}, nodes,
               [(0, i) for i in range(1, len(stats))], {"xtx": "symmetric_gaussian"})


class _RecordingRun:
    """Wraps privsdr.plan.Run to keep the outputs of the last run (the audit reads the released statistics)."""

    last: dict = {}
    halve: tuple = ()

    @classmethod
    def make(cls, halve=()):
        from privsdr.plan import Run

        class Recording(Run):
            def _spec_for(self, name, sensitivity):
                spec = super()._spec_for(name, sensitivity)
                return spec.scaled(0.5) if name in halve else spec

            def __exit__(self, *exc):
                cls.last = dict(self.outputs)
                return super().__exit__(*exc)

        return Recording


def _chunked_moments_audit(monkeypatch, halve, seed, samples=200):
    """The chunked DPSIR fit on neighbours that differ in one record of the second chunk: x = (1, 1, 1) against
    (-1, -1, -1), both in slice 0, so only the slice sums move (by their full sensitivity 2 sqrt(3) / n)."""
    from privsdr.algorithms import dpsir as dpsir_module
    from privsdr.audit import GDP, audit_estimator

    n, p = 40, 3
    rng = np.random.default_rng(3)
    X0 = rng.uniform(-1, 1, (n, p))
    y = np.where(np.arange(n) % 2 == 0, -8.0, 8.0)
    X0[12] = 1.0
    X1 = X0.copy()
    X1[12] = -1.0
    budget = Budget(6.0, 1e-5)  # mu ~ 1.3 for the slice sums: a halved noise is rejected with a few hundred samples
    kw = dict(bound=1.0, cut_points=CUTS, diagnose_noise=False)
    report = DPSIR(1, budget=budget, random_state=0, **kw).fit(X0, y).privacy_report_
    scale = {nd.name: nd.noise_scale for nd in report.nodes}
    claim = GDP.gaussian(next(nd.noise_multiplier for nd in report.nodes if nd.name == "slice_sums"), 1e-5)
    run_class = _RecordingRun.make(halve)
    monkeypatch.setattr(dpsir_module, "Run", run_class)

    def whiten(out):
        return np.concatenate([out["slice_sums"].ravel() / scale["slice_sums"], out["slice_counts"] / scale["slice_counts"]])

    def fit(D, rng_, budget=budget):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the post-processing's eigengap warnings on 40 rows
            DPSIR(1, budget=budget, random_state=rng_, **kw).fit(_chunks(D, y, size=10))
        return whiten(_RecordingRun.last)

    def reference(D):
        return fit(D, 0, Budget.infinite())

    # 200 samples per side: the halved slice sums give mu >= 1.15 against the claimed 0.92
    return audit_estimator(fit, X0, X1, reference=reference, claim=claim, samples=samples, alpha=1e-3, seed=seed)


def test_the_chunked_fit_passes_its_audit_and_a_halved_sensitivity_fails(monkeypatch):
    ok = _chunked_moments_audit(monkeypatch, (), seed=41, samples=50)
    assert ok.passed, ok.summary()
    bad = _chunked_moments_audit(monkeypatch, ("slice_sums",), seed=42)
    assert not bad.passed, bad.summary()


def test_estimators_that_need_rows_in_memory_refuse_chunks_and_dask_arrays_before_spending(data):
    """A Chunks or dask input to an estimator without a chunked fit is refused with the reason (never loaded
    whole on the driver by a silent np.asarray), and nothing is charged."""
    da = pytest.importorskip("dask.array")
    from privsdr import DPBCDRegression, DPSparsePCA, FederatedSIR, PRIDERegressor, SparseDPSIR

    X, y = data
    B = Budget(1.0, 1e-5)
    makers = [
        lambda L: SparseDPSIR(1, sparsity=1, bound=2.5, cut_points=CUTS, ledger=L),
        lambda L: DPSparsePCA(1, sparsity=1, bound=2.5, ledger=L),
        lambda L: FederatedSIR(1, n_clients=2, bound=2.5, cut_points=CUTS, ledger=L),
        lambda L: DPBCDRegression(n_parties=2, budget=B, ledgers={"party0": L, "party1": L}, row_bound=1.0, label_bound=1.0,
                                  coef_bound=1.0),
        lambda L: PRIDERegressor(n_parties=2, budget=B, ledgers={"party0": L, "party1": L}, bounds=(-3.0, 3.0)),
        lambda L: DPPLS(1, mode="certified_iterative", bound_x=1.0, bound_y=1.0, ledger=L),
    ]
    Xd, yd = da.from_array(X, chunks=(1000, P)), da.from_array(y, chunks=1000)
    for make in makers:
        for source, target in ((Xd, yd), (_chunks(X, y), y)):
            ledger = Ledger(B)
            with pytest.raises((ValidationError, TypeError),
                               match="in memory|sums over rows|algorithm='moments'|mode='certified'"):
                make(ledger).fit(source, target)
            assert not ledger.runs and ledger.spent.epsilon == 0.0
