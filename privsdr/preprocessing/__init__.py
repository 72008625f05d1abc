"""Preprocessing that keeps a privsdr fit private (issue 25 item 3).

* ``PublicRangeScaler``: maps each column from a declared public range [low_j, high_j] to a target range, clipping
  what falls outside. Its parameters are public and its fit reads only the columns' number and names: free.
* ``DPStandardScaler``: standardises with a DP mean and a DP variance of the rows clipped to public bounds, charged to
  the ledger like any privsdr fit.
* ``check_pipeline``: the steps of a scikit-learn ``Pipeline`` that are fitted on the rows without noise (a
  ``StandardScaler``, ``MinMaxScaler``, ``PCA``, ``SimpleImputer``, ...); a privsdr fit inside a Pipeline behind one
  warns ``NonPrivatePreprocessingWarning``.

The names are loaded on first use. ``check_pipeline`` lives in ``privsdr._pipeline``, below the estimators: every fit
calls its fit-time check (from ``privsdr._sklearn``), so it imports no estimator.
"""
from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

_NAMES = {"PublicRangeScaler": ".public", "DPStandardScaler": ".standard", "check_pipeline": ".._pipeline",
          "PipelineProblem": ".._pipeline"}

__getattr__ = lazy_getattr(__name__, _NAMES, globals())

if TYPE_CHECKING:
    from .._pipeline import PipelineProblem, check_pipeline
    from .public import PublicRangeScaler
    from .standard import DPStandardScaler

__all__ = ["DPStandardScaler", "PipelineProblem", "PublicRangeScaler", "check_pipeline"]
