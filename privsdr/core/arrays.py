"""Array types of the numerical core, for annotations only (numpy's own typing; no runtime effect).

``FloatArray`` is what the core computes with: real floating arrays (``as_real_array`` turns every input
into float64; numpy's linear algebra is typed as returning ``floating``). ``IntArray`` holds slice labels
and row indices (``np.searchsorted``, ``np.unique``, permutations, the SRHT's selected columns).

With these, numpy's stubs type the arithmetic (``X.T @ X`` is a ``FloatArray``). Three kinds of value are
``Any`` to the type checker and get their type where they are bound (``mu: FloatArray = X.mean(axis=0)``):
reductions along an axis, entries of ``X.shape``, and everything scipy returns (scipy ships no hints).
"""
from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

FloatArray: TypeAlias = npt.NDArray[np.floating[Any]]
IntArray: TypeAlias = npt.NDArray[np.integer[Any]]
