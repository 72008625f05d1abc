"""Model files: a fitted estimator as versioned, pickle-free JSON (format ``privsdr.model``, version 1).

A model file is one JSON object::

    {"format": "privsdr.model", "format_version": 1, "estimator": "DPSIR", "privsdr_version": "...",
     "params": {...},     # the public constructor parameters (never the ledger, executor or seed)
     "fitted": {...},     # learned attributes (directions_, cut_points_, eigenvalues_, ...)
     "metadata": {...},   # public context from the caller (e.g. the CLI's column names)
     "digest": "sha256:...",
     "privacy_report": {...}}   # the fit's PrivacyReport, whose "model" field repeats the digest

``digest`` is the sha256 of the canonical JSON (sorted keys, no spaces) of the first six fields,
so it names the model independently of the report that points to it (the report cannot contain
the hash of a file that contains the report). ``load`` recomputes it and refuses a file whose
content, or whose report, does not match. Arrays are ``{"$array": {"dtype", "shape", "data"}}``;
non-finite floats ``{"$float": "inf"}``; budgets ``{"$budget": {"epsilon", "delta"}}``. Only
numbers, strings, lists and those tags are read back: no code is ever executed on load.

An estimator class takes part with ``@model_class`` and a ``model_attributes`` tuple; it gets
``save(path)`` and ``load(path)`` from ``PersistentModel``.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any, TypeVar

import attrs
import numpy as np

from ._io import atomic_write_bytes
from ._version import __version__
from .accounting import Budget
from .errors import ValidationError
from .report import PrivacyReport

FORMAT = "privsdr.model"
FORMAT_VERSION = 1
ARRAY_DTYPES = ("float64", "int64", "bool")
TRANSIENT_PARAMS = ("ledger", "executor", "random_state")  #: never written: accounts, machinery, secrets
_REGISTRY: dict[str, Any] = {}  #: estimator classes by name (their model_* attributes are a protocol, not a base class)
T = TypeVar("T")
C = TypeVar("C", bound=type)


def model_class(cls: C) -> C:
    """Register an estimator class so that ``load_model`` can rebuild it by name."""
    _REGISTRY[cls.__name__] = cls
    return cls


def model_classes() -> dict[str, Any]:
    return dict(_REGISTRY)


# -- encoding ---------------------------------------------------------------------------------------
def encode(value: Any, where: str = "value") -> Any:
    """Plain JSON for numbers, strings, lists, dicts, numpy arrays and budgets; refuses anything else."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else {"$float": "inf" if value > 0 else ("-inf" if value < 0 else "nan")}
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        dtype = "bool" if value.dtype == bool else ("int64" if np.issubdtype(value.dtype, np.integer) else "float64")
        if not (np.issubdtype(value.dtype, np.number) or value.dtype == bool) or np.iscomplexobj(value):
            raise ValidationError(f"cannot save {where}: arrays of {value.dtype} are not part of the model format")
        flat = value.astype(dtype).ravel().tolist()
        return {"$array": {"dtype": dtype, "shape": list(value.shape), "data": [encode(v, where) for v in flat]}}
    if isinstance(value, Budget):
        return {"$budget": {"epsilon": encode(value.epsilon), "delta": encode(value.delta)}}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ValidationError(f"cannot save {where}: dictionary keys must be strings")
        return {k: encode(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v, where) for v in value]
    if attrs.has(type(value)) and hasattr(value, "to_dict"):
        return encode(value.to_dict(), where)
    raise ValidationError(f"cannot save {where}: {type(value).__name__} is not part of the model format")


def decode(value: Any) -> Any:
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"$float"}:
        return float(value["$float"])
    if set(value) == {"$array"}:
        spec = value["$array"]
        if not isinstance(spec, dict) or spec.get("dtype") not in ARRAY_DTYPES or not isinstance(spec.get("shape"), list):
            raise ValidationError("malformed array in the model file")
        data = [decode(v) for v in spec.get("data", [])]
        try:
            return np.asarray(data, dtype=spec["dtype"]).reshape([int(s) for s in spec["shape"]])
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"malformed array in the model file: {exc}") from None
    if set(value) == {"$budget"}:
        b = value["$budget"]
        eps, delta = decode(b["epsilon"]), decode(b["delta"])
        return Budget.infinite() if math.isinf(eps) else Budget(eps, delta)
    return {k: decode(v) for k, v in value.items()}


def _canonical(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def payload_digest(payload: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(_canonical(payload)).hexdigest()


# -- writing ----------------------------------------------------------------------------------------
def model_payload(estimator: Any, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The digest-covered part of a model file (everything but the digest and the report)."""
    name = type(estimator).__name__
    if _REGISTRY.get(name) is not type(estimator):
        raise ValidationError(f"{name} is not a registered model class")
    missing = [a for a in getattr(estimator, "model_required", ()) if not hasattr(estimator, a)]
    if missing or getattr(estimator, "privacy_report_", None) is None:
        raise ValidationError(f"{name} is not fitted (or released nothing private, so has nothing to save): call fit() before save()")
    params = {k: v for k, v in estimator.get_params(deep=False).items() if k not in TRANSIENT_PARAMS}
    fitted = {a: getattr(estimator, a) for a in estimator.model_attributes if hasattr(estimator, a)}
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION, "estimator": name, "privsdr_version": __version__,
        "params": encode(params, f"{name} parameters"), "fitted": encode(fitted, f"{name} attributes"),
        "metadata": encode(dict(metadata or {}), "metadata"),
    }


def dumps(estimator: Any, metadata: dict[str, Any] | None = None) -> tuple[str, str]:
    """(JSON text of the model file, its digest). Sets ``estimator.privacy_report_.model``."""
    payload = model_payload(estimator, metadata)
    digest = payload_digest(payload)
    report = attrs.evolve(estimator.privacy_report_, model={"format": FORMAT, "format_version": FORMAT_VERSION, "digest": digest})
    estimator.privacy_report_ = report
    document = {**payload, "digest": digest, "privacy_report": report.to_dict()}
    return json.dumps(document, indent=1, sort_keys=False, allow_nan=False) + "\n", digest


def save_model(estimator: Any, path: str | os.PathLike[str], metadata: dict[str, Any] | None = None) -> str:
    """Write ``estimator`` to ``path`` atomically; return the digest (also in its privacy report)."""
    text, digest = dumps(estimator, metadata)
    atomic_write_bytes(path, text)
    return digest


# -- reading ----------------------------------------------------------------------------------------
def loads(text: str, expected: type | None = None, source: str = "the model file") -> Any:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{source} is not a privsdr model file ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValidationError(f"{source} is not a privsdr model file (format {document.get('format') if isinstance(document, dict) else None!r})")
    if document.get("format_version") != FORMAT_VERSION:
        raise ValidationError(f"{source} has model format version {document.get('format_version')!r}; this privsdr reads {FORMAT_VERSION}")
    keys = ("format", "format_version", "estimator", "privsdr_version", "params", "fitted", "metadata")
    if any(k not in document for k in (*keys, "digest", "privacy_report")):
        raise ValidationError(f"{source} is incomplete (needs {', '.join(keys)}, digest, privacy_report)")
    payload = {k: document[k] for k in keys}
    digest = payload_digest(payload)
    if document["digest"] != digest:
        raise ValidationError(f"{source} was modified: its content does not match its digest")
    try:
        report = PrivacyReport.from_dict(document["privacy_report"])
    except ValueError as exc:
        raise ValidationError(f"{source}: {exc}") from None
    if not report.model or report.model.get("digest") != digest:
        raise ValidationError(f"{source}: its privacy report belongs to another model (digest mismatch)")
    name = document["estimator"]
    cls = _REGISTRY.get(name)
    if cls is None:
        raise ValidationError(f"{source} holds a {name!r}, which this privsdr cannot load (known: {', '.join(sorted(_REGISTRY))})")
    if expected is not None and not issubclass(cls, expected):
        raise ValidationError(f"{source} holds a {name}, not a {expected.__name__}")
    params, fitted = decode(document["params"]), decode(document["fitted"])
    if not isinstance(params, dict) or not isinstance(fitted, dict):
        raise ValidationError(f"{source}: params and fitted must be objects")
    unknown = [a for a in fitted if a not in cls.model_attributes]
    if unknown:
        raise ValidationError(f"{source}: unknown attributes {unknown} for {name}")
    try:
        estimator = cls(**params)
    except TypeError as exc:
        raise ValidationError(f"{source}: parameters do not fit {name}: {exc}") from None
    for attr, value in fitted.items():
        setattr(estimator, attr, cls.restore_attribute(attr, value))
    estimator.privacy_report_ = report
    estimator.model_metadata_ = decode(document["metadata"])
    estimator.model_digest_ = digest
    return estimator


def load_model(path: str | os.PathLike[str], expected: type | None = None) -> Any:
    """The estimator saved in ``path`` (any registered class, or ``expected`` and its subclasses)."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ValidationError(f"model file not found: {path}") from None
    except UnicodeDecodeError:
        raise ValidationError(f"{path} is not a privsdr model file (not UTF-8 text)") from None
    return loads(text, expected, source=str(path))


class PersistentModel:
    """``save(path)`` / ``load(path)`` for a registered estimator (see the module docstring)."""

    model_attributes: tuple[str, ...] = ()
    model_required: tuple[str, ...] = ()

    def save(self, path: str | os.PathLike[str], metadata: dict[str, Any] | None = None) -> str:
        """Write the fitted model to ``path`` (JSON, pickle-free); return its digest, which the
        privacy report (``privacy_report_.model``) now records too."""
        return save_model(self, path, metadata)

    @classmethod
    def load(cls: type[T], path: str | os.PathLike[str]) -> T:
        return load_model(path, expected=cls)

    @classmethod
    def restore_attribute(cls, name: str, value: Any) -> Any:
        """Hook: turn a decoded attribute back into its fitted type (default: as decoded)."""
        return value
