"""Numerical core: numpy/scipy only. Never imports accounting, mechanisms, plans or algorithms."""
from .gradient import batch_terms, batches, eigen_floor, pca_update, project_columns, sir_update
from .moments import clip_rows_l2, mean, nearest_psd, second_moment
from .pls import (
    KernelPLS1,
    PLS1Fit,
    centred_moments,
    deflate,
    kernel_pls1,
    nipals_pls1,
    pls1_loadings,
    pls1_score,
    pls1_weight,
    regression_vector,
)
from .sir import (
    classical_sir,
    covariance_uncentred,
    generalized_eigen,
    kernel_diagonal,
    orthonormalize,
    projection_distance,
    projector,
    sir_kernel,
    whitened_eigen,
)
from .spectra import airpls, msc, savgol, snv
from .slicing import equal_count_cut_points, slice_by_category, slice_by_cut_points, slice_sums
from .validation import check_matrix, check_positive

__all__ = [name for name in dir() if not name.startswith("_")]
