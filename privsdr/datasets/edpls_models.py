"""The edPLS paper's simulated two-holder spectra (Sec. 3.1; spec edpls_001.md §6.1), for the attack.

Four Gaussian-shaped signals on the index grid 0..99 (centre mu, width sigma, "height" h):
analyte s1 (50, 15, 8), interferent s2 (70, 10, 10), s3 (40, 1, 0.5), s4 (30, 1, 0.5). Holder 1 has
X1 = [c1, c2, c3] [s1, s2, s3]^T, holder 2 X2 = [c1, c2, c4] [s1, s2, s4]^T, y = c1, every
concentration U[0, 10), n = 100 each, drawn separately per holder, no measurement noise. So holder
2's unique signal peaks at index 30 (what holder 1 can try to find) and holder 1's at 40.
``shape="pdf"``: h * normal pdf (the authors' library helper; spec A20 default); ``"height"``: peak h.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

GRID = np.arange(100.0)
SIGNALS = {"s1": (50.0, 15.0, 8.0), "s2": (70.0, 10.0, 10.0), "s3": (40.0, 1.0, 0.5), "s4": (30.0, 1.0, 0.5)}
UNIQUE_PEAK = {1: 40, 2: 30}  #: the index of each holder's own unique signal


class Holders(NamedTuple):
    X1: np.ndarray
    y1: np.ndarray
    X2: np.ndarray
    y2: np.ndarray
    signals: dict[str, np.ndarray]


def signal(name: str, shape: str = "pdf") -> np.ndarray:
    mu, sigma, h = SIGNALS[name]
    bump = np.exp(-((GRID - mu) ** 2) / (2.0 * sigma * sigma))
    if shape == "pdf":
        return h * bump / (sigma * np.sqrt(2.0 * np.pi))
    if shape == "height":
        return h * bump
    raise ValueError(f"shape must be 'pdf' or 'height', got {shape!r}")


def two_holders(n: int = 100, *, shape: str = "pdf", seed: Any = None) -> Holders:
    """Holder 1 (signals s1, s2, s3) and holder 2 (s1, s2, s4); y = the analyte concentration c1."""
    rng = np.random.default_rng(seed)
    s = {name: signal(name, shape) for name in SIGNALS}
    C1, C2 = rng.uniform(0.0, 10.0, (n, 3)), rng.uniform(0.0, 10.0, (n, 3))
    X1 = C1 @ np.vstack([s["s1"], s["s2"], s["s3"]])
    X2 = C2 @ np.vstack([s["s1"], s["s2"], s["s4"]])
    return Holders(X1, C1[:, 0].copy(), X2, C2[:, 0].copy(), s)
