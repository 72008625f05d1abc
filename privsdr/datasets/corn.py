"""The Cargill corn NIR data (m5 spectra, 80 x 700) shipped inside the package.

Provenance, citation and checksums: ``privsdr/datasets/data/README.md``.
"""
from __future__ import annotations

from importlib import resources
from typing import NamedTuple

import numpy as np

PROPERTIES = ("moisture", "oil", "protein", "starch")


class Corn(NamedTuple):
    X: np.ndarray  #: 80 x 700 spectra (instrument m5)
    y: np.ndarray  #: the chosen property, length 80
    wavelengths: np.ndarray  #: 1100..2498 nm in 2 nm steps
    properties: np.ndarray  #: 80 x 4: moisture, oil, protein, starch


def load_corn(target: str = "moisture") -> Corn:
    """X = m5 spectra, y = ``target`` (default moisture, as in the edPLS paper)."""
    if target not in PROPERTIES:
        raise ValueError(f"target must be one of {PROPERTIES}, got {target!r}")
    with resources.files("privsdr.datasets").joinpath("data/corn_m5.npz").open("rb") as fh:
        data = np.load(fh)
        X, props, wl = data["spectra"], data["properties"], data["wavelengths"]
    return Corn(X.copy(), props[:, PROPERTIES.index(target)].copy(), wl.astype(float), props.copy())
