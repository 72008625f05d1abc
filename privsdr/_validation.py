"""Input checks that raise privsdr's own errors (core raises plain ValueError/TypeError)."""
from __future__ import annotations

from typing import Any

import numpy as np

from . import core
from .errors import InputTypeError, ValidationError


def check_matrix(X: Any, name: str = "X", min_rows: int = 1) -> np.ndarray:
    """core.check_matrix, with its errors raised as privsdr.ValidationError."""
    try:
        return core.check_matrix(X, name, min_rows=min_rows)
    except TypeError as exc:
        raise InputTypeError(str(exc)) from None
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


def check_vector(y: Any, name: str = "y") -> np.ndarray:
    """core.check_vector, with its errors raised as privsdr errors."""
    try:
        return core.check_vector(y, name)
    except TypeError as exc:
        raise InputTypeError(str(exc)) from None
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


def check_positive(value: Any, name: str) -> float:
    try:
        return core.check_positive(value, name)
    except TypeError as exc:
        raise InputTypeError(str(exc)) from None
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
