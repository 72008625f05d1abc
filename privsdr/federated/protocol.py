"""The FSIR message protocol (He, Zhang & Chen; spec fsir_000.md §4, Algorithm 1).

A client turns its own records into a ``ClientMessage``: a private slice-mean matrix
M~ (p x H, slice sums divided by the client's n), a private second-moment matrix Sigma~ (p x p), its
public n, optional screening votes, and its own privacy report. Messages round-trip through bytes
(npz, no pickle) and files, so clients can run on different machines. ``FSIRConfig`` holds every
public choice that all clients must share; its hash travels with each message.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
from pathlib import Path
from typing import Any, Sequence

import attrs
import numpy as np

from ..errors import ValidationError

PROTOCOL = "privsdr.fsir"
PROTOCOL_VERSION = 1
MEAN_MECHANISMS = ("iid", "vgm", "vgm_public", "vgm_two_stage", "none")
COV_MECHANISMS = ("modsulq", "analyze_gauss", "none")
SCREENINGS = (None, "ccmd", "private")


def _tuple_or_none(value: Any) -> tuple[float, ...] | None:
    return None if value is None else tuple(float(v) for v in np.ravel(value))


@attrs.frozen
class FSIRConfig:
    """Public parameters every client of one FSIR run shares.

    ``bound`` with ``norm="linf"`` (R): coordinatewise truncation |x_ij| <= R after public
    centring/scaling (the paper; rows then have norm <= R sqrt(p)); with ``norm="l2"`` (C): rows
    scaled down to ||x|| <= C (spec §3.2 REC; tighter when C < R sqrt(p)).
    Slices: ``cut_points`` (public, continuous y) or ``classes`` (categorical y). ``mechanism`` for
    the slice means: ``iid`` (Proposition 2), ``vgm`` (Algorithm 2 as published: noise shape from
    the private data, status *claimed*), ``vgm_public`` (public basis ``basis`` and spectrum
    ``spectrum`` above the floor: certified), ``vgm_two_stage`` (an IID release first, its SVD shapes
    the second: certified), ``none`` (non-private baseline). ``cov_mechanism``: ``modsulq`` (Lemma 1)
    or ``analyze_gauss``. ``calibration`` of the Gaussian floors: ``classical`` / ``paper_approx`` /
    ``thm3_exact`` / ``analytic``. ``cov_share`` is the fraction of each client's budget spent on the
    covariance (the paper: 1/2). ``screening``: ``ccmd`` (Algorithm 3: NOT private), ``private``
    (peeling on the slice-mean rows), or None. CCMD clients vote for coordinates with
    |slice mean - mean| > ``ccmd_threshold`` in some slice (``ccmd_rule="threshold"``), or for the
    ``screen_size`` largest per slice (``"top_s"``, spec §4 REC); the server keeps a strict majority
    (``server_vote="majority"``, the paper) or the ``screen_size`` most-voted coordinates (``"top_s"``).
    """

    bound: float = attrs.field(converter=float)
    norm: str = "linf"
    cut_points: tuple[float, ...] | None = attrs.field(default=None, converter=_tuple_or_none)
    classes: tuple[float, ...] | None = attrs.field(default=None, converter=_tuple_or_none)
    mechanism: str = "iid"
    cov_mechanism: str = "modsulq"
    calibration: str = "classical"
    cov_share: float = 0.5
    n_directions: int | str = 1
    two_stage_share: float = 0.3
    basis: tuple[tuple[float, ...], ...] | None = attrs.field(
        default=None, converter=lambda b: None if b is None else tuple(tuple(map(float, row)) for row in np.asarray(b, dtype=float)))
    spectrum: tuple[float, ...] | None = attrs.field(default=None, converter=_tuple_or_none)
    screening: str | None = None
    screen_size: int = 5
    screen_share: float = 0.2
    ccmd_threshold: float | None = None
    ccmd_rule: str = "threshold"
    server_vote: str = "majority"

    def __attrs_post_init__(self) -> None:
        if not (math.isfinite(self.bound) and self.bound > 0):
            raise ValidationError("bound (R) must be a positive public number")
        if self.norm not in ("linf", "l2"):
            raise ValidationError("norm must be 'linf' (|x_ij| <= R, the paper) or 'l2' (||x|| <= C, spec §3.2 REC)")
        if (self.cut_points is None) == (self.classes is None):
            raise ValidationError("give exactly one of cut_points (continuous y) or classes (categorical y)")
        if self.cut_points is not None and np.any(np.diff(self.cut_points) <= 0):
            raise ValidationError("cut_points must be strictly increasing")
        if self.mechanism not in MEAN_MECHANISMS:
            raise ValidationError(f"mechanism must be one of {MEAN_MECHANISMS}")
        if self.cov_mechanism not in COV_MECHANISMS:
            raise ValidationError(f"cov_mechanism must be one of {COV_MECHANISMS}")
        if (self.mechanism == "none") != (self.cov_mechanism == "none"):
            raise ValidationError("the non-private baseline switches off both mechanisms")
        if self.mechanism == "vgm_public" and (self.basis is None or self.spectrum is None):
            raise ValidationError("vgm_public needs a public basis (p x p) and spectrum (p)")
        if self.screening not in SCREENINGS:
            raise ValidationError(f"screening must be one of {SCREENINGS}")
        if self.ccmd_rule not in ("threshold", "top_s") or self.server_vote not in ("majority", "top_s"):
            raise ValidationError("ccmd_rule is 'threshold' or 'top_s'; server_vote is 'majority' or 'top_s'")
        if self.screening == "ccmd" and self.ccmd_rule == "threshold" and self.ccmd_threshold is None:
            raise ValidationError("ccmd screening with rule 'threshold' needs ccmd_threshold (t)")
        for name in ("cov_share", "two_stage_share", "screen_share"):
            if not 0 < getattr(self, name) < 1:
                raise ValidationError(f"{name} must be in (0, 1)")

    @property
    def n_slices(self) -> int:
        return len(self.cut_points) + 1 if self.cut_points is not None else len(self.classes or ())

    def row_bound(self, p: int) -> float:
        """The public bound on ||x||_2 after truncation: R sqrt(p) (linf) or C (l2)."""
        return self.bound * math.sqrt(p) if self.norm == "linf" else self.bound

    def truncate(self, X: np.ndarray) -> np.ndarray:
        from ..core import clip_rows_l2

        return np.clip(X, -self.bound, self.bound) if self.norm == "linf" else clip_rows_l2(X, self.bound)

    def slice_labels(self, y: np.ndarray) -> np.ndarray:
        from ..core import slice_by_cut_points

        if self.cut_points is not None:
            return slice_by_cut_points(y, np.asarray(self.cut_points))
        classes = np.asarray(self.classes)
        labels = np.searchsorted(classes, y)
        if np.any(labels >= len(classes)) or np.any(classes[np.minimum(labels, len(classes) - 1)] != y):
            raise ValidationError("y has a class that is not in the public class list")
        return labels

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    def to_json(self) -> str:
        return json.dumps({"protocol": PROTOCOL, "version": PROTOCOL_VERSION, "config": self.to_dict()}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> "FSIRConfig":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"not an FSIR configuration: {exc}") from None
        if not isinstance(data, dict) or data.get("protocol") != PROTOCOL or data.get("version") != PROTOCOL_VERSION:
            raise ValidationError("not an FSIR configuration of this protocol version")
        return cls(**data["config"])

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True, default=str).encode()).hexdigest()[:16]


@attrs.frozen(eq=False)
class ClientMessage:
    """What one client uploads. Everything in it is a DP release or public (see ``report``)."""

    client_id: str
    config_digest: str
    n: int
    p: int
    n_slices: int
    slice_means: np.ndarray | None
    second_moment: np.ndarray | None
    report_json: str
    votes: tuple[int, ...] | None = None
    active: tuple[int, ...] | None = None
    protocol: str = PROTOCOL
    version: int = PROTOCOL_VERSION

    def to_bytes(self) -> bytes:
        meta = {k: getattr(self, k) for k in ("client_id", "config_digest", "n", "p", "n_slices", "report_json",
                                               "votes", "active", "protocol", "version")}
        arrays = {k: getattr(self, k) for k in ("slice_means", "second_moment") if getattr(self, k) is not None}
        buffer = io.BytesIO()
        np.savez(buffer, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "ClientMessage":
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as archive:
                meta = json.loads(archive["meta"].tobytes().decode())
                arrays = {k: archive[k] for k in ("slice_means", "second_moment") if k in archive.files}
        except Exception as exc:  # noqa: BLE001 - any decoding failure is a bad message
            raise ValidationError(f"not a readable FSIR message: {exc}") from None
        if meta.get("protocol") != PROTOCOL:
            raise ValidationError(f"not an FSIR message (protocol {meta.get('protocol')!r})")
        if meta.get("version") != PROTOCOL_VERSION:
            raise ValidationError(f"FSIR protocol version {meta.get('version')} is not {PROTOCOL_VERSION}")
        for key in ("votes", "active"):
            if meta.get(key) is not None:
                meta[key] = tuple(meta[key])
        return cls(slice_means=arrays.get("slice_means"), second_moment=arrays.get("second_moment"), **meta)

    def save(self, path: "str | Path") -> None:
        Path(path).write_bytes(self.to_bytes())

    @classmethod
    def load(cls, path: "str | Path") -> "ClientMessage":
        return cls.from_bytes(Path(path).read_bytes())

    @property
    def report(self) -> Any:
        from ..report import PrivacyReport

        return PrivacyReport.from_json(self.report_json)


def check_compatible(messages: Sequence[ClientMessage], config: FSIRConfig) -> None:
    """Refuse (clearly) messages that cannot be merged: another protocol, config, p or slicing."""
    if not messages:
        raise ValidationError("no client messages to merge")
    digest = config.digest()
    first = messages[0]
    for m in messages:
        if not isinstance(m, ClientMessage):
            raise ValidationError(f"not a ClientMessage: {type(m).__name__}")
        if m.config_digest != digest:
            raise ValidationError(f"client {m.client_id!r} used another configuration (digest {m.config_digest} != {digest})")
        if (m.p, m.n_slices, m.active) != (first.p, first.n_slices, first.active):
            raise ValidationError(f"client {m.client_id!r} has p={m.p}, H={m.n_slices}, active set {m.active}: "
                                  f"incompatible with client {first.client_id!r}")
        if m.slice_means is not None and m.slice_means.shape != (m.p, m.n_slices):
            raise ValidationError(f"client {m.client_id!r}: slice-mean matrix has shape {m.slice_means.shape}, not ({m.p}, {m.n_slices})")
        if m.second_moment is not None and m.second_moment.shape != (m.p, m.p):
            raise ValidationError(f"client {m.client_id!r}: second moment has shape {m.second_moment.shape}")
        for arr in (m.slice_means, m.second_moment):
            if arr is not None and not np.all(np.isfinite(arr)):
                raise ValidationError(f"client {m.client_id!r} sent NaN or inf")
        if m.n < 2:
            raise ValidationError(f"client {m.client_id!r} has too few records ({m.n})")
    ids = [m.client_id for m in messages]
    if len(set(ids)) != len(ids):
        raise ValidationError("two messages carry the same client id")
