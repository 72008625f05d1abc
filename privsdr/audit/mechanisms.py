"""Audits of registered mechanisms on their worst-case neighbouring pair.

For each mechanism the pair, statistic and threshold are fixed from the calibration alone, before
any sample is drawn (pre-registered), so no alpha is spent on choosing them:

* Gaussian family: outputs at 0 and at Delta*e1 (for the symmetric matrix, Delta on one diagonal
  entry; for the shaped Gaussian, along the direction of least noise); statistic = the coordinate
  along the shift; threshold Delta/2; claim mu-GDP with mu = 1/z of the calibration.
* Laplace: 0 versus Delta*e1, threshold Delta (where the density ratio is flat at e^eps); pure eps claim.
* report-noisy-max / peeling / noisy-top: 20 candidates; candidate 0 rises by Delta while the others fall by
  Delta; statistic = "index 0 selected". (Peeling's selection is audited; its calibration spreads the
  budget over many small steps, so this pair is far from tight. Noisy-top is audited against one round's
  own pure eps0 = 2 / z, the event the ledger charges per round.)

``noise_scale`` multiplies the noise actually drawn (not the claim): F < 1 is a mutant that must fail.

``sampler="secure"`` audits the exact discrete samplers (Gaussian family, Laplace): one release per sample
(the grid depends on the released dimension), against the guarantee they are charged -- rho-zCDP with
rho = 1/(2 z^2) for the discrete Gaussian (``ZCDP`` claim), pure 1/z for the discrete Laplace.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..accounting import Budget
from ..accounting.events import DistributedDiscreteGaussianEvent
from ..mechanisms import Mechanism, NoiseSpec, Sensitivity, get_mechanism
from .claims import GDP, ZCDP, ApproxDP
from .core import AuditResult, audit

#: per-side sample counts that certify eps_lb >= 0.8 at eps = 1 with alpha = 1e-3 (benchmarks/bench_audit.py)
DEFAULT_SAMPLES = {"gaussian": 100_000, "shaped_gaussian": 100_000, "symmetric_gaussian": 20_000, "laplace": 20_000,
                   "report_noisy_max": 20_000, "peeling": 20_000, "noisy_top": 20_000, "non_private": 2_000,
                   "distributed_gaussian": 5_000, "distributed_symmetric_gaussian": 5_000}


def _spec(mech: Mechanism, epsilon: float, delta: float, sensitivity: float, calibration: str | None, params: dict,
          sampler: str = "numpy") -> NoiseSpec:
    norm = mech.norms[0]
    share = Budget(epsilon, 0.0 if mech.pure else delta)
    if sampler != "numpy":
        return mech.calibrate(Sensitivity(sensitivity, norm), share, calibration, params, sampler=sampler)
    return mech.calibrate(Sensitivity(sensitivity, norm), share, calibration, params)


def audit_mechanism(
    mechanism: str | Mechanism,
    *,
    epsilon: float = 1.0,
    delta: float = 1e-5,
    sensitivity: float = 1.0,
    calibration: str | None = None,
    noise_scale: float = 1.0,
    samples: int | None = None,
    alpha: float = 1e-3,
    seed: int = 0,
    dim: int = 3,
    sampler: str = "numpy",
) -> AuditResult:
    """Audit one registered mechanism at (epsilon, delta) on its worst-case pair."""
    mech = get_mechanism(mechanism) if isinstance(mechanism, str) else mechanism
    if sampler != "numpy":
        if sampler not in mech.samplers:
            raise ValueError(f"mechanism {mech.name!r} has no {sampler!r} sampler")
        return _audit_secure(mech, epsilon, delta, float(sensitivity), calibration, noise_scale, samples or 20_000, alpha,
                             seed, dim)
    if not (noise_scale >= 0 and math.isfinite(noise_scale)):
        raise ValueError("noise_scale must be finite and >= 0")
    n = samples or DEFAULT_SAMPLES.get(mech.name, 20_000)
    D = float(sensitivity)
    name = mech.name
    if name == "opaque":
        raise ValueError("an opaque mechanism has no generic sampler: audit it with privsdr.audit.audit() on its own f(rng)")

    if name == "peeling":
        params = {"s": 1, "d": 1, "delta": delta}
        spec = _spec(mech, epsilon, delta, D, calibration, params)
        claim: Any = ApproxDP(epsilon, delta)
    elif name == "noisy_top":  # one round: report-noisy-max at the round's own pure eps0 = 2 / z (its charged event)
        params = {"s": 1, "delta": delta}
        spec = _spec(mech, epsilon, delta, D, calibration, params)
        claim = ApproxDP(2.0 / spec.noise_multiplier, 0.0)
    elif name == "symmetric_gaussian" and calibration == "modsulq":
        params = {"n": 100, "p": dim, "scale": 1.0}
        spec = _spec(mech, epsilon, delta, D, calibration, params)
        claim = GDP.gaussian(spec.noise_multiplier, delta)
    elif name == "non_private":
        spec = mech.calibrate(Sensitivity(D, "l2"), Budget(epsilon, delta))
        claim = ApproxDP(epsilon, delta)
    elif name in ("distributed_gaussian", "distributed_symmetric_gaussian"):
        # three parties' shares, none colluding: the opened noise is exactly what the charged event prices
        params = {"parties": 3, "colluders": 0, "dimension": 1}
        spec = _spec(mech, epsilon, delta, D, calibration, params)
        (event,) = mech.events(spec)
        if not isinstance(event, DistributedDiscreteGaussianEvent):
            raise TypeError(f"{name} is priced by {type(event).__name__}, not the distributed discrete Gaussian's event")
        claim = ZCDP(event.rho, delta)
    else:
        spec = _spec(mech, epsilon, delta, D, calibration, {})
        claim = ApproxDP(epsilon, 0.0) if mech.pure else GDP.gaussian(spec.noise_multiplier, delta)
    drawn = spec.scaled(noise_scale) if noise_scale != 1.0 else spec

    if name in ("gaussian", "laplace", "non_private"):
        v0, v1 = np.zeros(dim), np.zeros(dim)
        v1[0] = D

        def draw(v: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
            return mech.sample(mech.prepare(np.broadcast_to(v, (k, dim)), drawn), drawn, rng)

        # Laplace: the region y >= Delta, where the density ratio is flat at e^eps; Gaussian: the midpoint
        t = D if mech.pure else D / 2.0
        return audit(draw, v0, v1, claim=claim, statistic=lambda out: np.asarray(out)[:, 0], threshold=t,
                     samples=n, alpha=alpha, seed=seed, batched=True, inclusive=mech.pure)
    if name in ("distributed_gaussian", "distributed_symmetric_gaussian"):
        one_number = (1, 1) if name == "distributed_symmetric_gaussian" else (1,)

        def shares(v: float, rng: np.random.Generator) -> float:
            return float(mech.sample(mech.prepare(np.full(one_number, v), drawn), drawn, rng).ravel()[0])

        return audit(shares, 0.0, D, claim=claim, statistic=np.asarray, threshold=D / 2.0, samples=n, alpha=alpha,
                     seed=seed)
    if name == "shaped_gaussian":
        # least noise along e1 (exactly at the floor), more elsewhere: the worst direction is e1
        shape = np.diag([spec.scale] + [2.0 * spec.scale] * (dim - 1))
        v0, v1 = np.zeros(dim), np.zeros(dim)
        v1[0] = D

        def shaped(v: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
            cols = np.repeat(v[:, None], k, axis=1)
            factor = shape * noise_scale if noise_scale != 1.0 else shape
            prepared = mech.prepare(cols, spec, shape=shape)  # the floor check uses the certified shape
            return mech.sample(prepared, drawn, rng, shape=factor).T

        return audit(shaped, v0, v1, claim=claim, statistic=lambda out: np.asarray(out)[:, 0], threshold=D / 2.0,
                     samples=n, alpha=alpha, seed=seed, batched=True)
    if name == "symmetric_gaussian":
        m0, m1 = np.zeros((dim, dim)), np.zeros((dim, dim))
        m1[0, 0] = D

        def sym(m: np.ndarray, rng: np.random.Generator) -> float:
            return float(mech.sample(mech.prepare(m, drawn), drawn, rng)[0, 0])

        return audit(sym, m0, m1, claim=claim, statistic=np.asarray, threshold=D / 2.0, samples=n, alpha=alpha, seed=seed)
    k = 20  # candidates: index 0 rises by Delta while the others fall by Delta
    if name == "report_noisy_max":
        s0, s1 = np.full(k, D / 2.0), np.full(k, -D / 2.0)
        s0[0], s1[0] = 0.0, D

        def rnm(s: np.ndarray, rng: np.random.Generator) -> float:
            return float(mech.sample(mech.prepare(s, drawn), drawn, rng) == 0)

        return audit(rnm, s0, s1, claim=claim, statistic=np.asarray, threshold=0.5, samples=n, alpha=alpha, seed=seed)
    if name == "peeling":
        a0, a1 = np.full((1, k), D), np.zeros((1, k))
        a0[0, 0], a1[0, 0] = 0.0, D

        def peel(a: np.ndarray, rng: np.random.Generator) -> float:
            _, selected = mech.sample(mech.prepare(a, drawn), drawn, rng)
            return float(0 in selected)

        return audit(peel, a0, a1, claim=claim, statistic=np.asarray, threshold=0.5, samples=n, alpha=alpha, seed=seed)
    if name == "noisy_top":
        v0, v1 = np.full(k, D), np.zeros(k)
        v0[0], v1[0] = 0.0, D

        def top(v: np.ndarray, rng: np.random.Generator) -> float:
            return float(0 in mech.sample(mech.prepare(v, drawn), drawn, rng))

        return audit(top, v0, v1, claim=claim, statistic=np.asarray, threshold=0.5, samples=n, alpha=alpha, seed=seed)
    raise ValueError(f"no built-in audit pair for mechanism {name!r}: use privsdr.audit.audit() with your own pair")


def _audit_secure(mech: Mechanism, epsilon: float, delta: float, D: float, calibration: str | None, noise_scale: float,
                  n: int, alpha: float, seed: int, dim: int) -> AuditResult:
    """The secure sampler on the same worst-case pairs, one release of ``dim`` numbers per sample."""
    from ..mechanisms.gaussian import secure_floor

    spec = _spec(mech, epsilon, delta, D, calibration, {}, "secure")
    drawn = spec.scaled(noise_scale) if noise_scale != 1.0 else spec
    z = spec.noise_multiplier
    claim: Any = ApproxDP(1.0 / z, 0.0) if mech.pure else ZCDP(0.5 / (z * z), delta)
    certified: dict[str, Any] = {}
    drawn_options: dict[str, Any] = {}
    if mech.name == "shaped_gaussian":  # least noise along e1, exactly at the secure floor; the mutant scales it all
        floor = secure_floor(spec, dim)
        certified["shape"] = np.diag([floor] + [2.0 * floor] * (dim - 1))
        drawn_options["shape"] = certified["shape"] * noise_scale
    shape = (dim, dim) if mech.name == "symmetric_gaussian" else (dim,)

    def one(v: np.ndarray, rng: np.random.Generator) -> float:
        prepared = mech.prepare(v, spec, **certified)  # the floor check uses the certified shape
        return float(mech.sample(prepared, drawn, rng, **drawn_options).ravel()[0])

    v0, v1 = np.zeros(shape), np.zeros(shape)
    v1.ravel()[0] = D
    t = D if mech.pure else D / 2.0
    return audit(one, v0, v1, claim=claim, statistic=np.asarray, threshold=t, samples=n, alpha=alpha, seed=seed,
                 inclusive=mech.pure)
