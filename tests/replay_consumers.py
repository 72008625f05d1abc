"""Each certified case's consumer (``privsdr.released.fitted``), called the way a producer of its own would call it:
``<estimator>_from_released(released, public parameters)``, the public parameters read off the fitted estimator's
constructor arguments and its public shape (never its data). ``tests/replay_cases.py`` names one per case."""
from __future__ import annotations

from typing import Any

from privsdr.algorithms._base import diagnostic_rng
from privsdr.released import Released
from privsdr.released.fitted import Fitted


def mean_covariance(est: Any, released: Released) -> Fitted:
    from privsdr.algorithms.mean_covariance import mean_covariance_from_released

    p = est.n_features_in_
    return mean_covariance_from_released(released, est._validated_clip(p), est._center(p), est._box(p))


def standard_scaler(est: Any, released: Released) -> Fitted:
    from privsdr.algorithms._base import column_bounds, public_center
    from privsdr.preprocessing.standard import standard_scaler_from_released

    p = est.n_features_in_
    return standard_scaler_from_released(released, column_bounds(est.bound, p, "bound"), public_center(est.center, p),
                                         est._min_scale())


def msc(est: Any, released: Released) -> Fitted:
    from privsdr.algorithms.spectral import msc_from_released

    return msc_from_released(released, est._center(est.n_features_in_))


def sparse_pca(est: Any, released: Released) -> Fitted:
    from privsdr.algorithms.sparse_pca import sparse_pca_from_released

    K, s = int(est.n_components), int(est.sparsity)
    rng = diagnostic_rng(est.random_state) if est.diagnose_noise else None
    return sparse_pca_from_released(released, est.n_features_in_, K, s, rng)


def adassp(est: Any, released: Released) -> Fitted:
    from privsdr.algorithms.adassp import adassp_from_released

    c = est._checked(est.n_features_in_)
    return adassp_from_released(released, bound_x=c["bound_x"], bound_y=c["bound_y"], x_center=c["x_center"],
                                y_center=c["y_center"], fit_intercept=c["intercept"], failure_probability=c["rho"],
                                shrinkage=est.shrinkage, diagnose_noise=est.diagnose_noise, rng=diagnostic_rng(est.random_state))


def pls(est: Any, released: Released) -> Fitted:
    from privsdr.algorithms.pls import pls_from_released

    c = est._checked(2**31, est.n_features_in_)  # n only caps A at n - 1, which no case reaches (n > m)
    return pls_from_released(released, n_components=c["A"], auto=c["auto"], bound_x=c["bound_x"], bound_y=c["bound_y"],
                             x_center=c["x_center"], y_center=c["y_center"], centering=est.centering, ridge=c["ridge"],
                             psd_repair=c["psd_repair"], shrinkage=c["shrinkage"], diagnose_noise=est.diagnose_noise,
                             rng=diagnostic_rng(est.random_state))


def secure_vertical(est: Any, released: Released) -> Fitted:
    from privsdr.vertical.secure_regression import released_constant, secure_regression_from_released

    blocks = {p.name: p.n_columns for p in est.layout_.parties}
    c = est._checked(list(blocks), list(blocks.values()))
    return secure_regression_from_released(
        released, x_center=c["x_center"], y_center=c["y_center"], label_bound=c["label_bound"], constant=released_constant(c),
        columns_scale=c["columns_scale"], label_scale=c["label_scale"], fit_intercept=c["intercept"],
        n_components=c["n_components"], failure_probability=c["rho"], diagnose_noise=est.diagnose_noise,
        random_state=est.random_state, blocks=blocks)


def sir(est: Any, released: Released) -> Fitted:
    from privsdr.algorithms.dpsir import sir_from_released

    return sir_from_released(released, n_directions=est.n_directions, cut_points=est.cut_points_, center=est.public_center_,
                             centred=not (isinstance(est.center, str) and est.center == "none"), budget=est._resolve_budget()[0],
                             rng=diagnostic_rng(est.random_state) if est.diagnose_noise else None)


def sparse_sir(est: Any, released: Released) -> Fitted:
    from privsdr.algorithms.dpsir import sparse_sir_from_released

    c = est._checked()
    return sparse_sir_from_released(released, n_directions=int(c["K"]), sparsity=int(c["s"]), n_features=est.n_features_in_,
                                    cut_points=est.cut_points_, center=est.public_center_, bounds=est.bounds_,
                                    rng=diagnostic_rng(est.random_state) if est.diagnose_noise else None)


def fsir(est: Any, released: Released) -> Fitted:
    """The server's estimate from the pooled record (the attributes ``FederatedSIR`` keeps of it)."""
    import attrs

    from privsdr.federated.server import fsir_from_released

    c = est.config_
    fitted = fsir_from_released(released, n_directions=c.n_directions, centred=c.centred, center=c.public_center(est.n_features_in_),
                                active=est.active_, psd_floor=est.psd_floor)
    kept = ("directions_", "n_directions_", "center_", "released_")
    return attrs.evolve(fitted, attributes={k: fitted.attributes[k] for k in kept})


def secure_vertical_sir(est: Any, released: Released) -> Fitted:
    from privsdr.vertical.secure_moments import secure_sir_from_released

    blocks = {p.name: p.n_columns for p in est.layout_.parties}
    c = est._checked(list(blocks), list(blocks.values()))
    return secure_sir_from_released(released, n_directions=c["K"], cut_points=c["cuts"], x_center=c["x_center"], scale=c["scale"],
                                    rng=diagnostic_rng(est.random_state))


def secure_vertical_mean_covariance(est: Any, released: Released) -> Fitted:
    from privsdr.vertical.secure_moments import secure_mean_covariance_from_released

    blocks = {p.name: p.n_columns for p in est.layout_.parties}
    c = est._checked(list(blocks), list(blocks.values()))
    return secure_mean_covariance_from_released(released, clip=c["C"], x_center=c["x_center"], scale=c["scale"],
                                                n_components=est.n_components)
