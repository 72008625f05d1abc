"""The MPyC parties of a secure vertical fit, read off public values only (names, helpers, t): the helpers first
("helper", "helper2", ...), then the data parties in the layout's order, checked for an honest majority t < m/2.

Its own module, free of scikit-learn, so that a command that only needs the parties' order (``privsdr secure keys
--config``) does not import the estimators (``sklearn.base`` alone costs ~1.4 s of CPU per process);
``secure_regression`` and ``secure_moments`` re-use it.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..mechanisms.collusion import honest_majority

HELPER = "helper"
#: the most helpers a fit may ask for (each is one more MPyC process and its traffic)
MAX_HELPERS = 8
#: the column groups of the label and of the intercept's constant (a data party may not take these names)
LABEL, CONSTANT = "y", "1"


def helper_names(count: int) -> list[str]:
    """The names of ``count`` helpers, in MPyC's order: "helper", then "helper2", "helper3", ..."""
    return [HELPER if i == 1 else f"{HELPER}{i}" for i in range(1, count + 1)]


def helper_count(helper: Any, data_parties: int) -> int:
    """How many helpers ``helper`` asks for: True 1, False 0, "auto" 1 when fewer than 3 data parties (else 0), or
    a number k >= 0 of helpers. Each helper holds no data and adds a noise share, so with m parties and t colluders
    the opened noise sd is sqrt(m / (m - t)) times the calibrated one: more helpers bring it towards 1."""
    if isinstance(helper, str) and helper == "auto":
        return int(data_parties < 3)
    if isinstance(helper, (bool, np.bool_)):
        return int(bool(helper))
    if not isinstance(helper, (int, np.integer)) or not 0 <= helper <= MAX_HELPERS:
        raise ValidationError(f"helper must be 'auto', True, False or a number of helpers in [0, {MAX_HELPERS}], got {helper!r}")
    return int(helper)


def mpc_parties(names: Sequence[str], colluders: Any, helper: Any, taken: Sequence[str]) -> tuple[list[str], int]:
    """The MPyC parties of a secure Gram in order (the helpers first: ``helper_count``) and t, checked: an honest
    majority t < m/2, and no data party named as a helper or as one of the column groups in ``taken``."""
    t = colluders
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1:
        raise ValidationError(f"colluders (the collusion threshold t) must be an integer >= 1, got {t!r}")
    helpers = helper_names(helper_count(helper, len(names)))
    for name in [*taken, *helpers]:
        if name in names:
            raise ValidationError(f"{name!r} names a helper or a column group of the secure Gram; rename that data party")
    parties = helpers + list(names)
    if not honest_majority(len(parties), int(t)):
        raise ValidationError(f"{len(parties)} parties ({', '.join(parties)}) tolerate t < {len(parties) / 2:g} colluders, not {t}: "
                              + ("add a helper (helper=True)" if not helpers else "use fewer colluders or more parties"))
    return parties, int(t)


def regression_parties(names: Sequence[str], colluders: Any, helper: Any) -> tuple[list[str], int]:
    """``SecureVerticalRegression``'s parties and t for the data parties ``names`` (its label and constant column
    groups are names no data party may take)."""
    return mpc_parties(names, colluders, helper, (HELPER, LABEL, CONSTANT))
