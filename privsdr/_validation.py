"""Input checks that raise privsdr's own errors (core raises plain ValueError/TypeError)."""
from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from . import core
from ._chunked import is_chunked
from .core.validation import ComplexValuesError
from .errors import ComplexDataError, InputTypeError, ValidationError


@contextmanager
def privsdr_errors() -> Iterator[None]:
    """core's plain errors as privsdr's: complex input -> ComplexDataError, TypeError -> InputTypeError,
    ValueError -> ValidationError."""
    try:
        yield
    except ComplexValuesError as exc:
        raise ComplexDataError(str(exc)) from None
    except TypeError as exc:
        raise InputTypeError(str(exc)) from None
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


def check_matrix(X: Any, name: str = "X", min_rows: int = 1, finite: bool = True) -> np.ndarray:
    """core.check_matrix, with its errors raised as privsdr.ValidationError (``Chunks`` and dask arrays are
    refused here: the estimators that reduce them chunk by chunk intercept them before this check). ``finite=False``:
    the caller's one pass over the rows checks finiteness (``core.gram_pass``), before anything is charged."""
    refuse_chunked(X, name)
    with privsdr_errors():
        return core.check_matrix(X, name, min_rows=min_rows, finite=finite)


def refuse_chunked(X: Any, name: str = "X") -> None:
    """A clear refusal of ``privsdr.Chunks`` or a dask array where the rows must be in memory (never a silent
    ``np.asarray`` that would load a whole dask array on the driver)."""
    if is_chunked(X):
        raise InputTypeError(f"{name} is {type(X).__name__}: this estimator needs its rows in memory. Fits on privsdr.Chunks "
                             "and dask arrays are for the sums-over-rows estimators: DPSIR(algorithm='moments'), "
                             "DPMeanCovariance, DPPLS(mode='certified'), MSC (docs/scale.md)")


def warn_column_vector(y: Any, name: str = "y") -> None:
    """scikit-learn's DataConversionWarning for a column vector (n, 1) where a 1-D array is expected (it is flattened)."""
    shape = np.shape(np.asarray(y)) if y is not None else ()
    if len(shape) == 2 and shape[1] == 1:
        from sklearn.exceptions import DataConversionWarning  # imported only when there is something to warn about

        warnings.warn(f"A column-vector {name} was passed when a 1d array was expected; it is flattened to shape (n_samples,)",
                      DataConversionWarning, stacklevel=3)


def check_vector(y: Any, name: str = "y") -> np.ndarray:
    """core.check_vector, with its errors raised as privsdr errors (a column vector is flattened, with a warning)."""
    warn_column_vector(y, name)
    with privsdr_errors():
        return core.check_vector(y, name)


def check_positive(value: Any, name: str) -> float:
    with privsdr_errors():
        return core.check_positive(value, name)


def check_random_state(random_state: Any) -> Any:
    """None, a non-negative int, a SeedSequence or a Generator (what the plan's seeding accepts)."""
    if random_state is None or isinstance(random_state, (np.random.Generator, np.random.SeedSequence)):
        return random_state
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool) and random_state >= 0:
        return random_state
    raise InputTypeError(f"random_state must be None, a non-negative int, a SeedSequence or a Generator, got {random_state!r}")


def diagnostic_rng(random_state: Any) -> np.random.Generator:
    """The randomness of a free diagnostic (a parametric bootstrap of the releases): a child stream of the fit's seed,
    never the stream its noise came from; unseeded when the fit is."""
    seed = random_state.integers(2**63) if isinstance(random_state, np.random.Generator) else random_state
    return np.random.default_rng(None if seed is None else np.random.SeedSequence(int(seed)).spawn(2)[1])
