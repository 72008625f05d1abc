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
from .loco import dual_loco, naive_block_ridge, party_sketch, pride_error_bound, sketches, split_columns
from .gradient import batch_terms, batches, eigen_floor, pca_update, project_columns, sir_update
from .ridge import CVPath, LocalDesign, LocalFit, cv_path, default_lambdas, kfold, local_ridge, ridge, ridge_alpha, top_eigenvalue
from .sketch import SRHT, fwht, fwht_columns, next_power_of_two, row_norm_sensitivity
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
from .sufficient import clip_rows, clipped_sufficient_sums, iter_chunks, kernel_from_moments, sir_from_moments
from .validation import as_real_array, check_matrix, check_positive, check_vector

__all__ = [name for name in dir() if not name.startswith("_")]
