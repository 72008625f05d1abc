"""Numerical core: numpy/scipy only. Never imports accounting, mechanisms, plans or algorithms."""
from .moments import clip_rows_l2, mean, nearest_psd, second_moment
from .validation import check_matrix, check_positive

__all__ = ["check_matrix", "check_positive", "clip_rows_l2", "mean", "nearest_psd", "second_moment"]
