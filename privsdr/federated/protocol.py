"""The FSIR message protocol (He, Zhang & Chen; spec fsir_000.md §4, Algorithm 1).

A client turns its own records into a ``ClientMessage``: a private slice-mean matrix
M~ (p x H, slice sums divided by the client's n), a private second-moment matrix Sigma~ (p x p),
private slice proportions w~ (n_h / n, H; when the configuration centres at a DP mean), its public n,
optional screening votes, and its own privacy report. Messages round-trip through bytes (npz, no
pickle) and files, so clients can run on different machines. ``FSIRConfig`` holds every public
choice that all clients must share; its hash travels with each message.

Protocol version 2 added centring (``FSIRConfig.center``) and the slice proportions; uploads and
configurations of version 1 are refused with a message that says so.
"""
from __future__ import annotations

import functools
import hashlib
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from .._io import atomic_write_bytes
from .._json import parse_json
from ..errors import ValidationError

PROTOCOL = "privsdr.fsir"
PROTOCOL_VERSION = 2
MEAN_MECHANISMS = ("iid", "vgm", "vgm_public", "vgm_two_stage", "none")
COV_MECHANISMS = ("modsulq", "analyze_gauss", "none")
SCREENINGS = (None, "ccmd", "private")
CENTERS = ("dp", "none")
ARRAYS = ("slice_means", "second_moment", "proportions")  #: the released arrays a message may carry


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _tuple_or_none(value: Any) -> tuple[float, ...] | None:
    if value is None:
        return None
    try:
        values = tuple(float(v) for v in np.ravel(np.asarray(value, dtype=float)))
    except (TypeError, ValueError):
        raise ValidationError(f"expected a list of numbers, got {value!r}") from None
    if not all(math.isfinite(v) for v in values):
        raise ValidationError(f"expected finite numbers, got {value!r}")
    return values


def _bound(value: Any) -> float | tuple[float, ...]:
    """A scalar bound, or one bound per column (a tuple)."""
    if isinstance(value, (bool, np.bool_)):
        raise ValidationError("bound (R) must be a positive public number or one per column, not a boolean")
    if np.ndim(value) == 0:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValidationError(f"bound (R) must be a positive public number, got {value!r}") from None
    try:
        return tuple(float(v) for v in np.ravel(np.asarray(value, dtype=float)))
    except (TypeError, ValueError):
        raise ValidationError("bound (R) must be a positive number or one positive number per column") from None


def _center(value: Any) -> str | tuple[float, ...]:
    """'dp' (the default; None reads as 'dp'), 'none', or a public centre: one number, or one per column."""
    if value is None:
        return "dp"
    if isinstance(value, str):
        if value not in CENTERS:
            raise ValidationError(f"center must be 'dp', 'none' or a public vector (one number per column), got {value!r}")
        return value
    if isinstance(value, (bool, np.bool_)):
        raise ValidationError("center must be 'dp', 'none' or a public vector, not a boolean")
    try:
        values = tuple(float(v) for v in np.ravel(np.asarray(value, dtype=float)))
    except (TypeError, ValueError):
        raise ValidationError(f"center must be 'dp', 'none' or a numeric public vector, got {value!r}") from None
    if not values or not all(math.isfinite(v) for v in values):
        raise ValidationError("center must be finite: a public vector of numbers, one per column (or one for all)")
    return values


def _version_refusal(what: str, version: Any, remedy: str) -> str:
    if version == 1:
        return (f"{what} uses FSIR protocol version 1, written before centring (no slice proportions); this privsdr speaks "
                f"version {PROTOCOL_VERSION}: {remedy} (the default now centres at a DP mean; center 'none' is version 1's "
                "uncentred estimator)")
    return f"{what} uses FSIR protocol version {version!r}; this privsdr speaks version {PROTOCOL_VERSION}: {remedy}"


def _names_or_none(value: Any) -> tuple[str, ...] | None:
    return None if value is None else tuple(str(v) for v in value)


@attrs.frozen
class FSIRConfig:
    """Public parameters every client of one FSIR run shares.

    ``bound`` with ``norm="linf"`` (R): coordinatewise truncation |x_ij| <= R after public
    centring/scaling (the paper; rows then have norm <= R sqrt(p)), or one bound R_j per column
    (rows then have norm <= ||R||_2); with ``norm="l2"`` (C): rows scaled down to ||x|| <= C (spec
    §3.2 REC; tighter when C < R sqrt(p)). ``columns`` (optional) names the feature columns in order,
    so that every client reads the same columns from its own table.
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
    ``center``: ``"dp"`` (default) -- each client also releases its slice proportions n_h / n
    (``center_share`` of its budget) and the server centres at the mean mu = sum_h M~[:, h] of the
    merged slice means (free): M~_c = M~ - mu w~^T, Sigma~_c = Sigma~ - mu mu^T; a public vector --
    subtracted from the rows before truncation, then the same DP correction; ``"none"`` -- data
    assumed centred, no proportions released (the paper).
    """

    bound: float | tuple[float, ...] = attrs.field(converter=_bound)
    norm: str = "linf"
    cut_points: tuple[float, ...] | None = attrs.field(default=None, converter=_tuple_or_none)
    classes: tuple[float, ...] | None = attrs.field(default=None, converter=_tuple_or_none)
    mechanism: str = "iid"
    cov_mechanism: str = "analyze_gauss"
    calibration: str = "analytic"
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
    columns: tuple[str, ...] | None = attrs.field(default=None, converter=_names_or_none)
    center: str | tuple[float, ...] = attrs.field(default="dp", converter=_center)
    center_share: float = 0.1

    def __attrs_post_init__(self) -> None:
        values = np.atleast_1d(np.asarray(self.bound, dtype=float))
        if values.size == 0 or not np.all(np.isfinite(values) & (values > 0)):
            raise ValidationError("bound (R) must be a positive public number, or one positive number per column")
        if self.norm not in ("linf", "l2"):
            raise ValidationError("norm must be 'linf' (|x_ij| <= R, the paper) or 'l2' (||x|| <= C, spec §3.2 REC)")
        if self.per_column and self.norm != "linf":
            raise ValidationError("per-column bounds need norm='linf' (|x_ij| <= R_j); norm='l2' bounds the whole row by one C")
        if self.columns is not None and (len(set(self.columns)) != len(self.columns) or not self.columns):
            raise ValidationError("columns must be distinct names")
        if self.per_column and self.columns is not None and len(self.columns) != len(self.bound):  # type: ignore[arg-type]
            raise ValidationError(f"{len(self.bound)} per-column bounds for {len(self.columns)} columns")  # type: ignore[arg-type]
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
        for name in ("cov_share", "two_stage_share", "screen_share", "center_share"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
                raise ValidationError(f"{name} must be a number in (0, 1), got {value!r}")
        d = self.n_directions
        if d != "auto" and (isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1):
            raise ValidationError(f"n_directions must be a positive integer or 'auto', got {d!r}")
        if self.cut_points is not None and not self.cut_points:
            raise ValidationError("cut_points needs at least one boundary")
        if self.classes is not None and len(set(self.classes)) != len(self.classes):
            raise ValidationError("classes must be distinct")
        s = self.screen_size
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1:
            raise ValidationError(f"screen_size must be a positive integer, got {s!r}")
        if self.centred and d != "auto" and int(d) > self.n_slices - 1:
            raise ValidationError(f"centred slice means span at most H - 1 = {self.n_slices - 1} directions; "
                                  f"n_directions = {d} needs more slices (or center='none', the paper's uncentred form)")
        if isinstance(self.center, tuple) and len(self.center) > 1:
            width = len(self.columns) if self.columns is not None else (len(self.bound) if self.per_column else None)  # type: ignore[arg-type]
            if width is not None and len(self.center) != width:
                raise ValidationError(f"center has {len(self.center)} values for {width} columns")

    @property
    def centred(self) -> bool:
        """The server centres at a DP mean (``center`` is 'dp' or a public vector): clients release proportions."""
        return self.center != "none"

    def public_center(self, p: int) -> np.ndarray:
        """The public location subtracted from the rows (of the configuration's p columns) before truncation."""
        if not isinstance(self.center, tuple):
            return np.zeros(p)
        if len(self.center) not in (1, p):
            raise ValidationError(f"center has {len(self.center)} values for {p} columns")
        return np.broadcast_to(np.asarray(self.center, dtype=float), (p,)).copy()

    @property
    def n_slices(self) -> int:
        return len(self.cut_points) + 1 if self.cut_points is not None else len(self.classes or ())

    @property
    def per_column(self) -> bool:
        return isinstance(self.bound, tuple)

    def column_bounds(self, p: int, active: Sequence[int] | None = None) -> np.ndarray:
        """|x_j| <= R_j for the p released columns (the ``active`` ones of the original columns, if given)."""
        if not self.per_column:
            return np.full(p, float(self.bound))  # type: ignore[arg-type]
        full = np.asarray(self.bound, dtype=float)
        if active is None:
            if p != full.size:
                raise ValidationError(f"the configuration has {full.size} per-column bounds; the data has {p} columns")
            return full
        idx = np.asarray(active, dtype=int)
        if idx.size != p or np.any(idx < 0) or np.any(idx >= full.size):
            raise ValidationError(f"active columns {tuple(active)} do not fit {full.size} per-column bounds")
        return full[idx]

    def row_bound(self, p: int, active: Sequence[int] | None = None) -> float:
        """The public bound on ||x||_2 after truncation: R sqrt(p) or ||R||_2 (linf), or C (l2)."""
        if self.norm == "l2":
            return float(self.bound)  # type: ignore[arg-type]
        if not self.per_column:
            return float(self.bound) * math.sqrt(p)  # type: ignore[arg-type]
        return float(np.sqrt(np.sum(self.column_bounds(p, active) ** 2)))

    def entry_bounds(self, p: int, active: Sequence[int] | None = None) -> np.ndarray:
        """|x_j| after truncation, per released column: R_j (linf) or C (l2)."""
        if self.norm == "l2":
            return np.full(p, float(self.bound))  # type: ignore[arg-type]
        return self.column_bounds(p, active)

    def truncate(self, X: np.ndarray, active: Sequence[int] | None = None) -> np.ndarray:
        from ..core import clip_rows_l2

        if self.norm == "l2":
            return clip_rows_l2(X, float(self.bound))  # type: ignore[arg-type]
        R = self.column_bounds(X.shape[1], active)
        return np.clip(X, -R, R)

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
        data = attrs.asdict(self)
        data["center"] = list(self.center) if isinstance(self.center, tuple) else self.center
        if data["columns"] is None:
            del data["columns"]  # configurations without column names keep their earlier digest
        return data

    def to_json(self) -> str:
        return json.dumps({"protocol": PROTOCOL, "version": PROTOCOL_VERSION, "config": self.to_dict()}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> FSIRConfig:
        try:
            data = parse_json(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"not an FSIR configuration ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(data, dict) or data.get("protocol") != PROTOCOL:
            raise ValidationError("not an FSIR configuration")
        if data.get("version") != PROTOCOL_VERSION:
            raise ValidationError(_version_refusal("this FSIR configuration", data.get("version"), "recreate it with `privsdr fsir config`"))
        fields = {a.name for a in attrs.fields(cls)}
        config = data.get("config")
        if not isinstance(config, dict) or not set(config) <= fields or "bound" not in config:
            unknown = sorted(set(config) - fields) if isinstance(config, dict) else []
            raise ValidationError("malformed FSIR configuration" + (f": unknown fields {unknown}" if unknown else ""))
        try:
            return cls(**config)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"malformed FSIR configuration: {exc}") from None

    def digest(self) -> str:
        return _digest(self)


@functools.lru_cache(maxsize=64)
def _digest(config: FSIRConfig) -> str:
    """sha256 of the configuration's canonical JSON (cached: the server recomputes every client's plan)."""
    return hashlib.sha256(json.dumps(config.to_dict(), sort_keys=True, default=str).encode()).hexdigest()[:16]


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
    proportions: np.ndarray | None = None
    protocol: str = PROTOCOL
    version: int = PROTOCOL_VERSION

    def to_bytes(self) -> bytes:
        meta = {k: getattr(self, k) for k in ("client_id", "config_digest", "n", "p", "n_slices", "report_json",
                                               "votes", "active", "protocol", "version")}
        arrays = {k: getattr(self, k) for k in ARRAYS if getattr(self, k) is not None}
        buffer = io.BytesIO()
        np.savez(buffer, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8), **arrays)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "message") -> ClientMessage:
        """Read an upload strictly: every field present with its type, float arrays (2-D; proportions 1-D)."""
        if not data.startswith(b"PK"):
            raise ValidationError(f"{source} is not a readable FSIR message (not an npz archive)")
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as archive:
                if "meta" not in archive.files:
                    raise ValueError("no 'meta' entry")
                meta = json.loads(archive["meta"].tobytes().decode("utf-8"))
                arrays = {k: archive[k] for k in ARRAYS if k in archive.files}
                extra = set(archive.files) - {"meta", *ARRAYS}
        except Exception as exc:  # noqa: BLE001 - any decoding failure is a bad message
            raise ValidationError(f"{source} is not a readable FSIR message ({type(exc).__name__}: {exc})") from None
        if not isinstance(meta, dict):
            raise ValidationError(f"{source} is not an FSIR message (its metadata is not an object)")
        if meta.get("protocol") != PROTOCOL:
            raise ValidationError(f"{source} is not an FSIR message (protocol {meta.get('protocol')!r})")
        if meta.get("version") != PROTOCOL_VERSION:
            raise ValidationError(_version_refusal(source, meta.get("version"), "recompute the upload with this privsdr"))
        expected = {"client_id", "config_digest", "n", "p", "n_slices", "report_json", "votes", "active", "protocol", "version"}
        if set(meta) != expected or extra:
            raise ValidationError(f"{source}: unexpected or missing fields {sorted(set(meta) ^ expected | extra)}")
        for key in ("client_id", "config_digest", "report_json"):
            if not isinstance(meta[key], str) or not meta[key]:
                raise ValidationError(f"{source}: {key} must be a non-empty string")
        for key in ("n", "p", "n_slices"):
            if not _is_int(meta[key]) or meta[key] < 1:
                raise ValidationError(f"{source}: {key} must be a positive integer, got {meta[key]!r}")
        for key in ("votes", "active"):
            if meta[key] is not None:
                if not isinstance(meta[key], list) or not all(_is_int(v) and v >= 0 for v in meta[key]):
                    raise ValidationError(f"{source}: {key} must be a list of column indices")
                meta[key] = tuple(meta[key])
        for key, arr in arrays.items():
            ndim = 1 if key == "proportions" else 2
            if arr.ndim != ndim or arr.dtype.kind != "f":
                raise ValidationError(f"{source}: {key} must be a {ndim}-D float array, got {arr.dtype} of shape {arr.shape}")
        return cls(slice_means=arrays.get("slice_means"), second_moment=arrays.get("second_moment"),
                   proportions=arrays.get("proportions"), **meta)

    def save(self, path: str | Path) -> None:
        atomic_write_bytes(path, self.to_bytes())

    @classmethod
    def load(cls, path: str | Path) -> ClientMessage:
        try:
            data = Path(path).read_bytes()
        except FileNotFoundError:
            raise ValidationError(f"message file not found: {path}") from None
        return cls.from_bytes(data, source=str(path))

    def payload_digest(self) -> str | None:
        """sha256 of the released arrays (None for a votes-only message): the same upload sent twice
        has the same digest, whatever client id it carries."""
        if self.slice_means is None and self.second_moment is None:
            return None
        h = hashlib.sha256()
        for arr in (self.slice_means, self.second_moment, self.proportions):
            h.update(b"-" if arr is None else np.ascontiguousarray(arr, dtype=float).tobytes())
        return h.hexdigest()

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
        if m.protocol != PROTOCOL or m.version != PROTOCOL_VERSION:
            raise ValidationError(_version_refusal(f"client {m.client_id!r}'s message", m.version, "recompute the upload with this privsdr")
                                  if m.protocol == PROTOCOL else f"client {m.client_id!r}: not an FSIR message (protocol {m.protocol!r})")
        if not isinstance(m.client_id, str) or not _is_int(m.p) or not _is_int(m.n_slices):
            raise ValidationError(f"client {m.client_id!r}: malformed message (client_id, p, n_slices)")
        if m.config_digest != digest:
            raise ValidationError(f"client {m.client_id!r} used another configuration (digest {m.config_digest} != {digest})")
        if (m.p, m.n_slices, m.active) != (first.p, first.n_slices, first.active):
            raise ValidationError(f"client {m.client_id!r} has p={m.p}, H={m.n_slices}, active set {m.active}: "
                                  f"incompatible with client {first.client_id!r}")
        if m.slice_means is not None and m.slice_means.shape != (m.p, m.n_slices):
            raise ValidationError(f"client {m.client_id!r}: slice-mean matrix has shape {m.slice_means.shape}, not ({m.p}, {m.n_slices})")
        if m.second_moment is not None and m.second_moment.shape != (m.p, m.p):
            raise ValidationError(f"client {m.client_id!r}: second moment has shape {m.second_moment.shape}")
        if m.proportions is not None and np.shape(m.proportions) != (m.n_slices,):
            raise ValidationError(f"client {m.client_id!r}: slice proportions have shape {np.shape(m.proportions)}, not ({m.n_slices},)")
        if m.slice_means is not None and (m.proportions is not None) != config.centred:
            raise ValidationError(f"client {m.client_id!r}: " + ("no slice proportions, which this configuration (center "
                                  f"{config.center!r}) needs to centre" if config.centred else
                                  "slice proportions under a configuration that does not centre (center 'none')"))
        for arr in (m.slice_means, m.second_moment, m.proportions):
            if arr is not None and not np.all(np.isfinite(arr)):
                raise ValidationError(f"client {m.client_id!r} sent NaN or inf")
        if not _is_int(m.n) or m.n < 2 * config.n_slices:
            raise ValidationError(f"client {m.client_id!r}: n must be an integer >= {2 * config.n_slices} "
                                  f"(2 records per slice), got {m.n!r}")
        if m.n_slices != config.n_slices:
            raise ValidationError(f"client {m.client_id!r} has H={m.n_slices} slices; the configuration has {config.n_slices}")
        if m.active is not None and (len(m.active) != m.p or len(set(m.active)) != m.p):
            raise ValidationError(f"client {m.client_id!r}: active set {m.active} does not name its {m.p} columns")
    ids = [m.client_id for m in messages]
    if len(set(ids)) != len(ids):
        raise ValidationError("two messages carry the same client id")
    seen: dict[str, str] = {}
    for m in messages:
        payload = m.payload_digest()
        if payload is not None and payload in seen:
            raise ValidationError(f"clients {seen[payload]!r} and {m.client_id!r} sent the same upload (payload digest "
                                  f"{payload[:16]}): one upload counted twice")
        if payload is not None:
            seen[payload] = m.client_id
