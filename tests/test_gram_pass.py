"""The one blocked pass (``privsdr.core.gram_pass``) against a plain numpy reference, in memory, on ``Chunks`` and on
Dask; its finiteness checks; and that a wrong clip in one block is caught by the reference comparison."""
from __future__ import annotations

from functools import partial

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privsdr.core import gram_pass
from privsdr.core.gram_pass import BLOCKS, RowParts, gram_sums
from privsdr.errors import ValidationError
from privsdr.rows import Chunks, reduce_rows

CUTS = np.array([-0.5, 0.0, 0.7])


def reference(X: np.ndarray, y: np.ndarray | None, parts: RowParts) -> dict[str, np.ndarray]:
    """Every block of the Gram of z = [clip(x) | phi(y) | 1], computed the plain way on the whole array."""
    U = np.asarray(X, dtype=float).copy()
    p = U.shape[1]
    if parts.shift is not None:
        U = U - np.broadcast_to(parts.shift, (p,))
    if parts.scale is not None:
        U = U / np.broadcast_to(parts.scale, (p,))
    if parts.box is not None:
        box = np.broadcast_to(parts.box, (p,))
        U = np.clip(U, -box, box)
    if parts.l2 is not None:
        norms = np.linalg.norm(U, axis=1)
        U = U * np.where(norms > parts.l2, parts.l2 / np.where(norms > 0, norms, 1.0), 1.0)[:, None]
    if parts.phi == "slices":
        labels = np.searchsorted(CUTS, y, side="left")
        P = np.eye(len(CUTS) + 1)[labels]
    elif parts.phi == "none":
        P = np.zeros((len(U), 0))
    else:
        t = np.clip(np.asarray(y, dtype=float) - parts.y_shift, -parts.y_bound, parts.y_bound)
        P = (t * t if parts.phi == "square" else t)[:, None]
    return {"count": np.asarray(float(len(U))), "x_sum": U.sum(axis=0), "xtx": U.T @ U, "x_sq": (U * U).sum(axis=0),
            "x_phi": U.T @ P, "phi_sum": P.sum(axis=0)}


def matches(sums: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> bool:
    scale = max(1.0, max(float(np.max(np.abs(v), initial=0.0)) for v in ref.values()))
    return all(np.allclose(sums[name], ref[name], rtol=1e-9, atol=1e-9 * scale) for name in sums)


@st.composite
def cases(draw):  # type: ignore[no-untyped-def]
    n, p = draw(st.integers(1, 60)), draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) * draw(st.sampled_from([0.1, 1.0, 30.0])) + draw(st.sampled_from([0.0, 5.0]))
    y = rng.normal(size=n)
    positive = st.floats(0.05, 10.0)
    phi = draw(st.sampled_from(["none", "label", "square", "slices"]))
    parts = RowParts(
        shift=draw(st.one_of(st.none(), st.just(rng.normal(size=p)), st.just(3.0))),
        scale=draw(st.one_of(st.none(), st.just(rng.uniform(0.5, 2.0, size=p)))),
        box=draw(st.one_of(st.none(), positive, st.just(rng.uniform(0.1, 3.0, size=p)))),
        l2=draw(st.one_of(st.none(), positive)),
        phi=phi, y_shift=draw(st.floats(-1.0, 1.0)), y_bound=draw(positive), cuts=CUTS if phi == "slices" else None)
    wanted = [b for b in BLOCKS if draw(st.booleans()) and (phi != "none" or b not in ("x_phi", "phi_sum"))] or ["xtx"]
    return X, (y if phi != "none" else None), parts, tuple(wanted), draw(st.integers(1, 9))


@settings(max_examples=50, deadline=None)
@given(cases())
def test_the_pass_in_memory_equals_the_numpy_reference(case):  # type: ignore[no-untyped-def]
    X, y, parts, wanted, block_rows = case
    ref = reference(X, y, parts)
    for rows in (block_rows, None):  # several blocks, and the default (one block at these sizes)
        sums = gram_sums(X, y, parts, wanted, block_rows=rows)
        assert set(sums) == set(wanted)
        assert matches(sums, ref)


@st.composite
def ball_cases(draw):  # type: ignore[no-untyped-def]
    """Rows for the pass that reads X's blocks without copying them (an L2 ball, nothing else): each row unclipped,
    just over the bound, far beyond it (more than ``FAR_FACTOR`` times; "large": so far that correcting X_b^T X_b for it
    would cancel every other row), zero, or huge (its square overflows)."""
    n, p = draw(st.integers(1, 40)), draw(st.integers(1, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    bound = draw(st.sampled_from([0.5, 1.0, 7.0]))
    kinds = draw(st.lists(st.sampled_from(["inside", "near", "far", "large", "zero", "huge"]), min_size=n, max_size=n))
    direction = rng.normal(size=(n, p))
    direction /= np.maximum(np.linalg.norm(direction, axis=1, keepdims=True), 1e-300)
    radius = {"inside": 0.9, "near": 1.0 + 2.0 * gram_pass.FAR_FACTOR * 0.25, "far": 3.0 * gram_pass.FAR_FACTOR,
              "large": 1e60, "zero": 0.0, "huge": 1e200}
    X = direction * np.array([radius[k] * (bound if k != "huge" else 1.0) for k in kinds])[:, None]
    phi = draw(st.sampled_from(["none", "label", "slices"]))
    y = rng.normal(size=n)
    parts = RowParts(l2=bound, phi=phi, y_shift=0.1, y_bound=1.0, cuts=CUTS if phi == "slices" else None)
    wanted = [b for b in BLOCKS if draw(st.booleans()) and (phi != "none" or b not in ("x_phi", "phi_sum"))] or ["xtx"]
    return X, (y if phi != "none" else None), parts, tuple(wanted), draw(st.integers(1, 9))


@settings(max_examples=60, deadline=None)
@given(ball_cases())
def test_the_uncopied_l2_pass_equals_clipping_a_copy_then_multiplying(case):  # type: ignore[no-untyped-def]
    """X_b^T X_b corrected for the clipped rows (and the copying rule for blocks with far or huge rows) is the Gram of
    the clipped rows, and the row norms the clip reads are finite-checked: the reference clips a copy, then X^T X."""
    X, y, parts, wanted, block_rows = case
    if np.abs(X).max() > 1e100:  # huge rows: the reference clips in units of 1e100 (where its squares are finite)
        unit = {"xtx": 1e200, "x_sq": 1e200, "x_sum": 1e100, "x_phi": 1e100}
        small = reference(X / 1e100, y, attrs.evolve(parts, l2=parts.l2 / 1e100))
        ref = {name: value * unit.get(name, 1.0) for name, value in small.items()}
    else:
        ref = reference(X, y, parts)
    if np.abs(X).max() < 1e30:
        single = X.astype(np.float32)  # converted block by block, then the same uncopied arithmetic
        assert matches(gram_sums(single, y, parts, wanted, block_rows=block_rows), reference(single, y, parts))
    for rows in (block_rows, None):
        assert matches(gram_sums(X, y, parts, wanted, block_rows=rows), ref)


@settings(max_examples=40, deadline=None)
@given(ball_cases(), st.data())
def test_a_nan_or_inf_anywhere_is_refused_by_the_uncopied_l2_pass(case, data):  # type: ignore[no-untyped-def]
    X, y, parts, wanted, block_rows = case
    X = X.copy()
    i, j = data.draw(st.integers(0, X.shape[0] - 1)), data.draw(st.integers(0, X.shape[1] - 1))
    X[i, j] = data.draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    if data.draw(st.booleans()) and X.shape[1] > 1:  # inf - inf and a row clipped to 0 * inf
        X[i, (j + 1) % X.shape[1]] = -X[i, j] if np.isinf(X[i, j]) else np.inf
    with pytest.raises(ValueError, match="NaN or inf"):
        gram_sums(X, y, parts, wanted, block_rows=block_rows)


def test_the_correction_for_clipped_rows_is_what_the_reference_checks(monkeypatch):
    """The uncopied pass summed without its correction for the clipped rows (X_b^T X_b alone) goes red above."""
    rng = np.random.default_rng(4)
    X, y = rng.normal(size=(40, 3)) * 1.5, rng.normal(size=40)
    parts = RowParts(l2=2.0, phi="label", y_bound=0.5)
    assert matches(gram_sums(X, y, parts, BLOCKS, block_rows=8), reference(X, y, parts))
    monkeypatch.setattr(gram_pass, "_clipped_rows", lambda Xb, bound2, far2: gram_pass._NONE_CLIPPED
                        if np.isfinite(np.einsum("ij,ij->i", Xb, Xb).sum()) else None)
    assert not matches(gram_sums(X, y, parts, BLOCKS, block_rows=8), reference(X, y, parts))


def _chunked(X: np.ndarray, y: np.ndarray | None, parts: RowParts, wanted: tuple[str, ...], block_rows: int, source: object,
             y_source: object = None) -> dict:
    fn = partial(gram_sums, parts=parts, blocks=wanted, block_rows=block_rows)
    total = reduce_rows(source, y_source, fn, with_y=y is not None, fn_checks_finite=True)
    assert (total.pop("n"), total.pop("p")) == X.shape
    return total


@settings(max_examples=30, deadline=None)
@given(cases(), st.integers(1, 25))
def test_the_pass_over_chunks_equals_the_numpy_reference(case, chunk):  # type: ignore[no-untyped-def]
    X, y, parts, wanted, block_rows = case
    starts = range(0, len(X), chunk)
    pieces = [(X[s:s + chunk], y[s:s + chunk]) if y is not None else X[s:s + chunk] for s in starts]
    assert matches(_chunked(X, y, parts, wanted, block_rows, Chunks(pieces)), reference(X, y, parts))


@settings(max_examples=4, deadline=None)
@given(cases(), st.integers(10, 25))
def test_the_pass_over_dask_partitions_equals_the_numpy_reference(case, chunk):  # type: ignore[no-untyped-def]
    da = pytest.importorskip("dask.array")
    import dask

    X, y, parts, wanted, block_rows = case
    Xd = da.from_array(X, chunks=(chunk, X.shape[1]))
    yd = None if y is None else da.from_array(y, chunks=chunk)
    with dask.config.set(scheduler="sync"):
        assert matches(_chunked(X, y, parts, wanted, block_rows, Xd, yd), reference(X, y, parts))


def test_a_block_left_unclipped_is_caught_by_the_reference(monkeypatch):
    """The reference comparison above goes red when one block of rows is summed without its clip."""
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(40, 3)) * 4.0, rng.normal(size=40)
    parts = RowParts(box=1.0, l2=1.2, phi="label", y_bound=0.5)
    assert matches(gram_sums(X, y, parts, BLOCKS, block_rows=8), reference(X, y, parts))
    clip_into = gram_pass._Rule.clip_into

    def skip_third_block(self, U, Xb, name):  # type: ignore[no-untyped-def]
        if Xb is not None and np.shares_memory(Xb, X[16:24]):
            np.copyto(U, Xb)
            return
        clip_into(self, U, Xb, name)

    monkeypatch.setattr(gram_pass._Rule, "clip_into", skip_third_block)
    assert not matches(gram_sums(X, y, parts, BLOCKS, block_rows=8), reference(X, y, parts))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_or_inf_in_a_late_block_is_refused(bad):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 4)), rng.normal(size=50)
    X[47, 2] = bad
    for parts in (RowParts(box=1.0), RowParts(l2=1.0), RowParts(shift=1.0, scale=2.0, box=1.0, l2=0.5)):
        with pytest.raises(ValueError, match="NaN or inf"):
            gram_sums(X, None, parts, ("xtx",), block_rows=8)
        with pytest.raises(ValueError, match="NaN or inf"):
            gram_sums(X, None, parts, ("x_sum", "x_sq"), block_rows=8)
    Xf, yb = rng.normal(size=(50, 4)), y.copy()
    yb[45] = bad
    with pytest.raises(ValueError, match="y contains NaN or inf"):
        gram_sums(Xf, yb, RowParts(l2=1.0, phi="label", y_bound=1.0), ("x_phi",), block_rows=8)
    chunks = Chunks([X[:25], X[25:]])
    with pytest.raises(ValidationError, match="NaN or inf"):
        reduce_rows(chunks, None, partial(gram_sums, parts=RowParts(l2=1.0), blocks=("xtx",)), with_y=False, fn_checks_finite=True)


def test_finite_rows_that_overflow_after_the_shift_are_clipped_not_refused():
    """|x - shift| beyond the float64 range: the clipped row is still the bound along the row's direction."""
    X = np.array([[1.5e308, -1.5e308], [0.3, 0.4]])
    shift = np.array([-1.5e308, 1.5e308])
    sums = gram_sums(X, None, RowParts(shift=shift, l2=2.0), ("x_sum", "xtx"))
    # both rows minus the shift point along (1, -1), far beyond the bound: each is (sqrt 2, -sqrt 2)
    np.testing.assert_allclose(sums["x_sum"], [2.0 * np.sqrt(2.0), -2.0 * np.sqrt(2.0)], rtol=1e-12)
    np.testing.assert_allclose(sums["xtx"], [[4.0, -4.0], [-4.0, 4.0]], rtol=1e-12)
    boxed = gram_sums(X, None, RowParts(shift=shift, box=1.0), ("x_sum",))
    np.testing.assert_allclose(boxed["x_sum"], [2.0, -2.0])


def test_a_float32_input_is_read_block_by_block_without_a_float64_copy():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 5)).astype(np.float32)
    parts = RowParts(l2=1.5)
    np.testing.assert_allclose(gram_sums(X, None, parts, ("xtx",), block_rows=64)["xtx"],
                               reference(X.astype(float), None, parts)["xtx"], rtol=1e-9)


def test_declarations_that_cannot_be_computed_are_refused():
    with pytest.raises(ValueError, match="phi must be one of"):
        RowParts(phi="cube")
    with pytest.raises(ValueError, match="cut points or the number of slices"):
        RowParts(phi="slices")
    with pytest.raises(ValueError, match="need a label part"):
        gram_sums(np.ones((3, 2)), None, RowParts(), ("x_phi",))
    with pytest.raises(ValueError, match="unknown Gram blocks"):
        gram_sums(np.ones((3, 2)), None, RowParts(), ("yty",))


# -- the estimators' producers: noise off, their released statistics are the reference blocks ---------------------
def _rows(n: int = 300, p: int = 4, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) * 2.0 + 0.3
    return X, X[:, 0] - X[:, 1] + rng.normal(size=n)


def test_noise_off_the_fits_release_the_reference_blocks_in_memory_and_on_chunks():
    from privsdr import AdaSSPRegression, Budget, DPMeanCovariance
    from privsdr.preprocessing import DPStandardScaler

    X, y = _rows()
    n = len(X)
    ssp = reference(X, y, RowParts(shift=0.2, l2=2.5, phi="label", y_shift=0.1, y_bound=1.5))
    for source in (X, Chunks([(X[s:s + 70], y[s:s + 70]) for s in range(0, n, 70)])):
        fit = AdaSSPRegression(bound_x=2.5, bound_y=1.5, x_center=0.2, y_center=0.1, budget=Budget.infinite())
        released = fit.fit(source, y if source is X else None).released_
        for name, block in (("xtx", "xtx"), ("x_sum", "x_sum"), ("y_sum", "phi_sum")):
            np.testing.assert_allclose(np.ravel(released[name]), np.ravel(ssp[block]), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(np.ravel(released["xty"]), ssp["x_phi"][:, 0], rtol=1e-10, atol=1e-10)
    box = np.array([1.0, 2.0, 0.5, 3.0])
    moments = reference(X, None, RowParts(shift=0.3, box=box, l2=2.0))
    for source in (X, Chunks([X[s:s + 70] for s in range(0, n, 70)])):
        mc = DPMeanCovariance(clip=2.0, bounds=box, center=np.full(4, 0.3), budget=Budget.infinite()).fit(source)
        np.testing.assert_allclose(mc.second_moment_, moments["xtx"] / n, rtol=1e-10, atol=1e-12)
    scaled = reference(X, None, RowParts(shift=0.3, scale=box, box=1.0))
    scaler = DPStandardScaler(bound=box, center=np.full(4, 0.3), budget=Budget.infinite()).fit(X)
    np.testing.assert_allclose(scaler.mean_, 0.3 + box * scaled["x_sum"] / n, rtol=1e-10)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_inf_found_in_the_pass_is_refused_before_anything_is_charged(bad):
    from privsdr import DPPLS, DPSIR, AdaSSPRegression, Budget, DPMeanCovariance, Ledger
    from privsdr.preprocessing import DPStandardScaler

    X, y = _rows()
    X[290, 1] = bad  # in the last block of a small block size: found by the pass, not by a separate check
    fits = [lambda led: AdaSSPRegression(bound_x=2.0, bound_y=2.0, ledger=led).fit(X, y),
            lambda led: DPPLS(1, bound_x=2.0, bound_y=2.0, ledger=led).fit(X, y),
            lambda led: DPMeanCovariance(clip=2.0, ledger=led).fit(X),
            lambda led: DPStandardScaler(bound=2.0, ledger=led).fit(X),
            lambda led: DPSIR(1, bound=2.0, cut_points=[-1.0, 0.0, 1.0], ledger=led).fit(X, y)]
    for fit in fits:
        ledger = Ledger(Budget(1.0, 1e-5))
        with pytest.raises(ValidationError, match="NaN or inf"):
            fit(ledger)
        assert ledger.spent.epsilon == 0.0 and not ledger.runs
