"""Numerical core: numpy/scipy only. Never imports accounting, mechanisms, plans or algorithms."""
from .bcd import (
    BCDResult,
    BlockSolver,
    aapd,
    abort_probability,
    bcd,
    bcd_offset_form,
    gamma_min,
    largest_canonical_correlation,
    local_residual,
    paper_utility_bound,
    provable_sse_bound,
    r_squared,
)
from .gradient import batch_terms, batches, eigen_floor, pca_update, project_columns, sir_update
from .loco import dual_loco, naive_block_ridge, party_sketch, pride_error_bound, sketches, split_columns
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
from .ridge import CVPath, LocalDesign, LocalFit, cv_path, default_lambdas, kfold, local_ridge, ridge, ridge_alpha, top_eigenvalue
from .sir import (
    classical_sir,
    covariance_uncentred,
    generalized_eigen,
    kernel_diagonal,
    orthonormalize,
    projection_distance,
    projection_distances,
    projector,
    sir_kernel,
    whitened_eigen,
)
from .sketch import SRHT, fwht, fwht_columns, next_power_of_two, row_norm_sensitivity
from .slicing import equal_count_cut_points, slice_by_category, slice_by_cut_points, slice_sums
from .spectra import airpls, msc, savgol, snv
from .sufficient import (
    clip_rows,
    clipped_sufficient_sums,
    iter_chunks,
    kernel_from_moments,
    sir_from_moments,
    slice_spread_scores,
)
from .validation import as_real_array, check_matrix, check_positive, check_vector

__all__ = [
    "aapd", "abort_probability", "airpls", "as_real_array", "batch_terms", "batches", "bcd", "bcd_offset_form",
    "BCDResult", "BlockSolver", "centred_moments", "check_matrix", "check_positive", "check_vector",
    "classical_sir", "slice_spread_scores", "clip_rows", "clip_rows_l2", "clipped_sufficient_sums", "covariance_uncentred", "cv_path",
    "CVPath", "default_lambdas", "deflate", "dual_loco", "eigen_floor", "equal_count_cut_points", "fwht",
    "fwht_columns", "gamma_min", "generalized_eigen", "iter_chunks", "kernel_diagonal", "kernel_from_moments",
    "kernel_pls1", "KernelPLS1", "kfold", "largest_canonical_correlation", "local_residual", "local_ridge",
    "LocalDesign", "LocalFit", "mean", "msc", "naive_block_ridge", "nearest_psd", "next_power_of_two",
    "nipals_pls1", "orthonormalize", "paper_utility_bound", "party_sketch", "pca_update", "pls1_loadings",
    "pls1_score", "pls1_weight", "PLS1Fit", "pride_error_bound", "project_columns", "projection_distance", "projection_distances",
    "projector", "provable_sse_bound", "r_squared", "regression_vector", "ridge", "ridge_alpha",
    "row_norm_sensitivity", "savgol", "second_moment", "sir_from_moments", "sir_kernel", "sir_update",
    "sketches", "slice_by_category", "slice_by_cut_points", "slice_sums", "snv", "split_columns", "SRHT",
    "top_eigenvalue", "whitened_eigen",
]
