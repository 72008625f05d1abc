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
``save(path)`` and ``load(path)`` from ``PersistentModel``. Every file also keeps ``n_features_in_`` and
``feature_names_in_`` (a list of strings) when the fit set them, so a loaded model checks new rows' columns as
the fitted one does.

Estimators whose fit yields one report per party (``DPBCDRegression``, ``PRIDERegressor``: ``privacy_reports_``)
write ``"privacy_reports": {party: report}`` instead of ``"privacy_report"``; every report's ``model`` names the
digest (and its key, ``"report"``). A class that releases nothing private by construction (``model_public = True``:
``PublicRangeScaler``) writes ``"privacy_reports": {}``.

A fitted scikit-learn ``Pipeline`` is one file too (``save_model(pipe, path)`` or ``save_pipeline``; ``load_model``
returns the Pipeline): ``"estimator": "Pipeline"``, ``params`` its own parameters but the steps, ``fitted`` =
``{"steps": [{"name", "estimator", "params", "fitted"}, ...]}`` and ``privacy_reports`` keyed by step name (or
``"step/party"``). A step is a registered privsdr class, ``"passthrough"``, or one of the public scikit-learn steps of
``PUBLIC_SKLEARN_STEPS`` (stateless: their fitted state is the number and names of the columns); anything else, such as
a ``StandardScaler`` whose fitted mean was read off the rows without noise, is refused.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
from pathlib import Path
from typing import Any, TypeVar

import attrs
import numpy as np

from ._io import atomic_write_bytes
from ._json import parse_json
from ._version import __version__
from .accounting import Budget
from .errors import ValidationError
from .report import PrivacyReport

FORMAT = "privsdr.model"
FORMAT_VERSION = 1
ARRAY_DTYPES = ("float64", "int64", "bool")
TRANSIENT_PARAMS = ("ledger", "ledgers", "executor", "random_state")  #: never written: accounts, machinery, secrets
COMMON_ATTRIBUTES = ("n_features_in_", "feature_names_in_")  #: kept for every class that has them (column checks)
#: where each model class is defined: imported when a file names a class not loaded yet (``import privsdr`` is lazy, so a
#: process that only loads a model has registered nothing)
MODEL_MODULES = {
    "DPSIR": "privsdr.algorithms.dpsir", "SparseDPSIR": "privsdr.algorithms.dpsir", "DPSparsePCA": "privsdr.algorithms.sparse_pca",
    "DPMeanCovariance": "privsdr.algorithms.mean_covariance", "DPPLS": "privsdr.algorithms.pls",
    "AdaSSPRegression": "privsdr.algorithms.adassp", "MSC": "privsdr.algorithms.spectral",
    "FederatedSIR": "privsdr.federated.estimator", "DPBCDRegression": "privsdr.vertical.estimator",
    "PRIDERegressor": "privsdr.vertical.pride_estimator", "SecureVerticalRegression": "privsdr.vertical.secure_regression",
    "SecureVerticalSIR": "privsdr.vertical.secure_moments", "SecureVerticalMeanCovariance": "privsdr.vertical.secure_moments",
    "PublicRangeScaler": "privsdr.preprocessing.public", "DPStandardScaler": "privsdr.preprocessing.standard",
}
PIPELINE = "Pipeline"  #: the ``estimator`` of a scikit-learn Pipeline's file
#: scikit-learn steps a Pipeline file may hold: stateless (fit learns only the columns' number and names) and row-local,
#: so they read nothing of the private rows. FunctionTransformer only with no function or a numpy ufunc.
PUBLIC_SKLEARN_STEPS = ("sklearn.preprocessing.FunctionTransformer", "sklearn.preprocessing.Normalizer",
                        "sklearn.preprocessing.Binarizer")
_REGISTRY: dict[str, Any] = {}  #: estimator classes by name (their model_* attributes are a protocol, not a base class)
T = TypeVar("T")
C = TypeVar("C", bound=type)


def model_class(cls: C) -> C:
    """Register an estimator class so that ``load_model`` can rebuild it by name."""
    _REGISTRY[cls.__name__] = cls
    return cls


def model_classes() -> dict[str, Any]:
    return dict(_REGISTRY)


def registered(name: str) -> Any:
    """The registered class called ``name`` (on a miss, imported from ``MODEL_MODULES`` and registered), or None."""
    if name not in _REGISTRY and name in MODEL_MODULES:
        cls = getattr(importlib.import_module(MODEL_MODULES[name]), name, None)
        if isinstance(cls, type) and issubclass(cls, PersistentModel):
            _REGISTRY[name] = cls
    return _REGISTRY.get(name)


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
def _is_pipeline(value: Any) -> bool:
    import sys

    pipeline = sys.modules.get("sklearn.pipeline")  # a Pipeline exists only once its module was imported
    return pipeline is not None and type(value) is pipeline.Pipeline


def _record(estimator: Any) -> dict[str, Any]:
    """``{"estimator", "params", "fitted"}`` of a registered, fitted estimator (no report)."""
    name = type(estimator).__name__
    if registered(name) is not type(estimator):
        raise ValidationError(f"{name} is not a registered model class")
    missing = [a for a in getattr(estimator, "model_required", ()) if not hasattr(estimator, a)]
    if missing:
        raise ValidationError(f"{name} is not fitted (or released nothing private, so has nothing to save): call fit() before save()")
    params = {k: v for k, v in estimator.get_params(deep=False).items() if k not in TRANSIENT_PARAMS}
    fitted = {}
    for attr in dict.fromkeys((*estimator.model_attributes, *COMMON_ATTRIBUTES)):
        if hasattr(estimator, attr):
            value = getattr(estimator, attr)
            fitted[attr] = [str(v) for v in value] if attr == "feature_names_in_" else value
    return {"estimator": name, "params": encode(params, f"{name} parameters"), "fitted": encode(fitted, f"{name} attributes")}


def _reports(estimator: Any) -> PrivacyReport | dict[str, PrivacyReport]:
    """The fit's report, or its reports by party (``privacy_reports_``); ``{}`` for a public class."""
    single = getattr(estimator, "privacy_report_", None)
    if single is not None:
        return single
    several = getattr(estimator, "privacy_reports_", None)
    if several:
        return dict(several)
    if getattr(type(estimator), "model_public", False):
        return {}
    raise ValidationError(f"{type(estimator).__name__} is not fitted (or released nothing private, so has nothing to save): "
                          "call fit() before save()")


def _ufunc_name(value: Any, where: str) -> dict[str, str] | None:
    """``{"$ufunc": name}`` for a numpy ufunc reachable as ``numpy.<name>`` (None: not a function)."""
    if value is None:
        return None
    name = getattr(value, "__name__", None)
    if isinstance(value, np.ufunc) and isinstance(name, str) and getattr(np, name, None) is value:
        return {"$ufunc": name}
    raise ValidationError(f"cannot save {where}: only no function or a numpy ufunc (np.log, np.sqrt, ...) is part of the model "
                          f"format, got {value!r}")


def public_sklearn_step(step: Any) -> bool:
    """Whether ``step`` is one of ``PUBLIC_SKLEARN_STEPS`` (that very class, not a subclass), and a FunctionTransformer
    has no function or a numpy ufunc both ways: elementwise or row-local, fitted on nothing but the columns."""
    import sklearn.preprocessing

    name = type(step).__name__
    if f"sklearn.preprocessing.{name}" not in PUBLIC_SKLEARN_STEPS or getattr(sklearn.preprocessing, name, None) is not type(step):
        return False
    return all(f is None or isinstance(f, np.ufunc) for f in (getattr(step, "func", None), getattr(step, "inverse_func", None)))


def _sklearn_record(step: Any, name: str) -> dict[str, Any]:
    """A public scikit-learn step (``PUBLIC_SKLEARN_STEPS``) as ``{"estimator", "params", "fitted"}``."""
    from sklearn.utils.validation import check_is_fitted

    qualified = f"sklearn.preprocessing.{type(step).__name__}"
    if not public_sklearn_step(step):
        raise ValidationError(
            f"cannot save the Pipeline: step {name!r} is a {type(step).__module__}.{type(step).__name__}, which is not part of "
            f"the model format. A Pipeline file holds privsdr estimators, PublicRangeScaler and the stateless scikit-learn "
            f"steps {', '.join(s.rsplit('.', 1)[1] for s in PUBLIC_SKLEARN_STEPS)}; a step fitted on the rows without noise "
            "(StandardScaler, MinMaxScaler, PCA, SimpleImputer, ...) is not a DP release: use privsdr.preprocessing.PublicRangeScaler "
            "or DPStandardScaler")
    check_is_fitted(step)
    params = dict(step.get_params(deep=False))
    for key in ("func", "inverse_func"):
        if key in params:
            params[key] = _ufunc_name(params[key], f"step {name!r}: {key}")
    if callable(params.get("feature_names_out")):
        raise ValidationError(f"cannot save step {name!r}: a feature_names_out function is not part of the model format")
    fitted = {a: ([str(v) for v in getattr(step, a)] if a == "feature_names_in_" else getattr(step, a))
              for a in COMMON_ATTRIBUTES if hasattr(step, a)}
    return {"estimator": qualified, "params": encode(params, f"step {name!r} parameters"), "fitted": encode(fitted, f"step {name!r}")}


def _pipeline_body(pipe: Any) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    """(``{"estimator", "params", "fitted"}`` of a fitted Pipeline, its privsdr steps as (name, step))."""
    params = {k: v for k, v in pipe.get_params(deep=False).items() if k != "steps"}
    steps, own = [], []
    for name, step in pipe.steps:
        if "/" in name:
            raise ValidationError(f"cannot save the Pipeline: step names may not contain '/', got {name!r}")
        if step is None or (isinstance(step, str) and step == "passthrough"):
            steps.append({"name": name, "estimator": "passthrough", "params": {}, "fitted": {}})
        elif isinstance(step, PersistentModel):
            _reports(step)  # fitted, with its report(s), before anything is written
            steps.append({"name": name, **_record(step)})
            own.append((name, step))
        else:
            steps.append({"name": name, **_sklearn_record(step, name)})
    return {"estimator": PIPELINE, "params": encode(params, "Pipeline parameters"), "fitted": {"steps": steps}}, own


def model_payload(estimator: Any, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The digest-covered part of a model file (everything but the digest and the report)."""
    if _is_pipeline(estimator):
        body, _ = _pipeline_body(estimator)
    else:
        body = _record(estimator)
        _reports(estimator)
    return {
        "format": FORMAT, "format_version": FORMAT_VERSION, "estimator": body["estimator"], "privsdr_version": __version__,
        "params": body["params"], "fitted": body["fitted"], "metadata": encode(dict(metadata or {}), "metadata"),
    }


def _stamp(estimator: Any, stamp: dict[str, Any], prefix: str = "") -> dict[str, PrivacyReport] | PrivacyReport:
    """Give the estimator's report(s) the model's digest (set on the estimator too); keyed ``prefix + party``."""
    reports = _reports(estimator)
    if isinstance(reports, PrivacyReport):
        stamped = attrs.evolve(reports, model={**stamp, "report": prefix.rstrip("/")} if prefix else dict(stamp))
        estimator.privacy_report_ = stamped
        return stamped if not prefix else {prefix.rstrip("/"): stamped}
    if not reports:
        return {}
    by_party = {key: attrs.evolve(report, model={**stamp, "report": prefix + key}) for key, report in reports.items()}
    estimator.privacy_reports_ = by_party
    return {prefix + key: report for key, report in by_party.items()}


def dumps(estimator: Any, metadata: dict[str, Any] | None = None) -> tuple[str, str]:
    """(JSON text of the model file, its digest). Sets the report's (every report's) ``model`` to the digest."""
    payload = model_payload(estimator, metadata)
    digest = payload_digest(payload)
    stamp = {"format": FORMAT, "format_version": FORMAT_VERSION, "digest": digest}
    if _is_pipeline(estimator):
        reports: dict[str, PrivacyReport] = {}
        for name, step in _pipeline_body(estimator)[1]:
            found = _stamp(step, stamp, name + "/")
            assert isinstance(found, dict)
            reports.update(found)
        estimator.model_digest_ = digest
        document = {**payload, "digest": digest, "privacy_reports": {k: r.to_dict() for k, r in reports.items()}}
    else:
        stamped = _stamp(estimator, stamp)
        section = ({"privacy_report": stamped.to_dict()} if isinstance(stamped, PrivacyReport)
                   else {"privacy_reports": {k: r.to_dict() for k, r in stamped.items()}})
        document = {**payload, "digest": digest, **section}
    return json.dumps(document, indent=1, sort_keys=False, allow_nan=False) + "\n", digest


def save_model(estimator: Any, path: str | os.PathLike[str], metadata: dict[str, Any] | None = None) -> str:
    """Write ``estimator`` (or a fitted scikit-learn ``Pipeline`` of privsdr and public steps) to ``path`` atomically;
    return the digest (also in its privacy report(s))."""
    text, digest = dumps(estimator, metadata)
    atomic_write_bytes(path, text)
    return digest


def save_pipeline(pipe: Any, path: str | os.PathLike[str], metadata: dict[str, Any] | None = None) -> str:
    """``save_model`` for a fitted scikit-learn ``Pipeline`` (refuses anything else)."""
    if not _is_pipeline(pipe):
        raise ValidationError(f"save_pipeline takes a fitted sklearn.pipeline.Pipeline, got {type(pipe).__name__}")
    return save_model(pipe, path, metadata)


# -- reading ----------------------------------------------------------------------------------------
def _read_reports(document: dict[str, Any], digest: str, source: str) -> PrivacyReport | dict[str, PrivacyReport]:
    single = "privacy_report" in document
    raw = document["privacy_report"] if single else document["privacy_reports"]
    if not single and not isinstance(raw, dict):
        raise ValidationError(f"{source}: privacy_reports must be an object")
    try:
        reports = PrivacyReport.from_dict(raw) if single else {str(k): PrivacyReport.from_dict(v) for k, v in raw.items()}
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValidationError(f"{source}: {exc}") from None
    for report in [reports] if isinstance(reports, PrivacyReport) else list(reports.values()):
        if not report.model or report.model.get("digest") != digest:
            raise ValidationError(f"{source}: its privacy report belongs to another model (digest mismatch)")
    return reports


def _build(record: Any, source: str, expected: type | None = None) -> Any:
    """A registered estimator from ``{"estimator", "params", "fitted"}`` (no report attached)."""
    if not isinstance(record, dict) or not isinstance(record.get("estimator"), str):
        raise ValidationError(f"{source}: malformed estimator record")
    name = record["estimator"]
    cls = registered(name)
    if cls is None:
        raise ValidationError(f"{source} holds a {name!r}, which this privsdr cannot load (known: {', '.join(sorted(MODEL_MODULES))})")
    if expected is not None and not issubclass(cls, expected):
        raise ValidationError(f"{source} holds a {name}, not a {expected.__name__}")
    params, fitted = decode(record.get("params")), decode(record.get("fitted"))
    if not isinstance(params, dict) or not isinstance(fitted, dict):
        raise ValidationError(f"{source}: params and fitted must be objects")
    unknown = [a for a in fitted if a not in cls.model_attributes and a not in COMMON_ATTRIBUTES]
    if unknown:
        raise ValidationError(f"{source}: unknown attributes {unknown} for {name}")
    try:
        estimator = cls(**params)
    except TypeError as exc:
        raise ValidationError(f"{source}: parameters do not fit {name}: {exc}") from None
    for attr, value in fitted.items():
        setattr(estimator, attr, _restore(cls, attr, value, source))
    return estimator


def _feature_names(value: Any, source: str) -> np.ndarray:
    """``feature_names_in_`` as scikit-learn keeps it: an object array of strings."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValidationError(f"{source}: feature_names_in_ must be a list of strings")
    return np.asarray(value, dtype=object)


def _restore(cls: Any, attr: str, value: Any, source: str) -> Any:
    return _feature_names(value, source) if attr == "feature_names_in_" else cls.restore_attribute(attr, value)


def _attach(estimator: Any, reports: PrivacyReport | dict[str, PrivacyReport], source: str) -> None:
    if isinstance(reports, PrivacyReport):
        estimator.privacy_report_ = reports
    elif reports:
        estimator.privacy_reports_ = dict(reports)
    elif not getattr(type(estimator), "model_public", False):
        raise ValidationError(f"{source}: a {type(estimator).__name__} file needs its privacy report")


def _sklearn_step(record: dict[str, Any], source: str) -> Any:
    """A public scikit-learn step from its record (``PUBLIC_SKLEARN_STEPS`` only; ufuncs by numpy name)."""
    qualified = record.get("estimator")
    if qualified not in PUBLIC_SKLEARN_STEPS:
        raise ValidationError(f"{source}: step {record.get('name')!r} is a {qualified!r}, which is not part of the model format")
    import sklearn.preprocessing

    params, fitted = record.get("params"), decode(record.get("fitted"))
    if not isinstance(params, dict) or not isinstance(fitted, dict) or set(fitted) - set(COMMON_ATTRIBUTES):
        raise ValidationError(f"{source}: malformed step {record.get('name')!r}")
    values = {}
    for key, value in params.items():
        if isinstance(value, dict) and set(value) == {"$ufunc"}:
            found = getattr(np, str(value["$ufunc"]), None)
            if not isinstance(found, np.ufunc):
                raise ValidationError(f"{source}: {value['$ufunc']!r} is not a numpy ufunc")
            values[key] = found
        else:
            values[key] = decode(value)
    try:
        step = getattr(sklearn.preprocessing, qualified.rsplit(".", 1)[1])(**values)
    except TypeError as exc:
        raise ValidationError(f"{source}: parameters do not fit {qualified}: {exc}") from None
    if not public_sklearn_step(step):
        raise ValidationError(f"{source}: step {record.get('name')!r} is not one of the public steps of the model format")
    for attr, value in fitted.items():
        setattr(step, attr, _feature_names(value, source) if attr == "feature_names_in_" else value)
    return step


def _pipeline(document: dict[str, Any], reports: dict[str, PrivacyReport], source: str) -> Any:
    from sklearn.pipeline import Pipeline

    params, fitted = decode(document["params"]), document["fitted"]
    if not isinstance(params, dict) or not isinstance(fitted, dict) or not isinstance(fitted.get("steps"), list) or not fitted["steps"]:
        raise ValidationError(f"{source}: a Pipeline file needs its steps")
    steps, used = [], set()
    for record in fitted["steps"]:
        name = record.get("name") if isinstance(record, dict) else None
        if not isinstance(name, str):
            raise ValidationError(f"{source}: every Pipeline step needs a name")
        if record.get("estimator") == "passthrough":
            steps.append((name, "passthrough"))
        elif str(record.get("estimator", "")).startswith("sklearn."):
            steps.append((name, _sklearn_step(record, source)))
        else:
            step = _build(record, source)
            own = {k: r for k, r in reports.items() if k == name or k.startswith(name + "/")}
            used |= set(own)
            _attach(step, own.get(name) or {k.split("/", 1)[1]: r for k, r in own.items() if "/" in k}, f"{source} (step {name!r})")
            steps.append((name, step))
    if set(reports) - used:
        raise ValidationError(f"{source}: privacy reports {sorted(set(reports) - used)} belong to no step")
    try:
        return Pipeline(steps, **params)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{source}: not a valid Pipeline: {exc}") from None


def loads(text: str, expected: type | None = None, source: str = "the model file") -> Any:
    try:
        document = parse_json(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{source} is not a privsdr model file ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValidationError(f"{source} is not a privsdr model file (format {document.get('format') if isinstance(document, dict) else None!r})")
    if document.get("format_version") != FORMAT_VERSION:
        raise ValidationError(f"{source} has model format version {document.get('format_version')!r}; this privsdr reads {FORMAT_VERSION}")
    keys = ("format", "format_version", "estimator", "privsdr_version", "params", "fitted", "metadata")
    if any(k not in document for k in (*keys, "digest")) or not ({"privacy_report", "privacy_reports"} & set(document)):
        raise ValidationError(f"{source} is incomplete (needs {', '.join(keys)}, digest, privacy_report or privacy_reports)")
    payload = {k: document[k] for k in keys}
    digest = payload_digest(payload)
    if document["digest"] != digest:
        raise ValidationError(f"{source} was modified: its content does not match its digest")
    reports = _read_reports(document, digest, source)
    if document["estimator"] == PIPELINE:
        from sklearn.pipeline import Pipeline

        if expected is not None and not issubclass(Pipeline, expected):
            raise ValidationError(f"{source} holds a Pipeline, not a {expected.__name__}")
        if isinstance(reports, PrivacyReport):
            raise ValidationError(f"{source}: a Pipeline file keeps its reports by step (privacy_reports)")
        estimator = _pipeline(document, reports, source)
    else:
        estimator = _build(payload, source, expected)
        _attach(estimator, reports, source)
    estimator.model_metadata_ = decode(document["metadata"])
    estimator.model_digest_ = digest
    return estimator


def load_model(path: str | os.PathLike[str], expected: type | None = None) -> Any:
    """The estimator (or Pipeline) saved in ``path`` (any registered class, or ``expected`` and its subclasses)."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ValidationError(f"model file not found: {path}") from None
    except UnicodeDecodeError:
        raise ValidationError(f"{path} is not a privsdr model file (not UTF-8 text)") from None
    return loads(text, expected, source=str(path))


def load_pipeline(path: str | os.PathLike[str]) -> Any:
    """The scikit-learn ``Pipeline`` saved in ``path`` by ``save_pipeline``/``save_model``."""
    from sklearn.pipeline import Pipeline

    return load_model(path, expected=Pipeline)


class PersistentModel:
    """``save(path)`` / ``load(path)`` for a registered estimator (see the module docstring)."""

    model_attributes: tuple[str, ...] = ()
    model_required: tuple[str, ...] = ()
    model_public: bool = False  #: True: releases nothing private by construction (a file without a report)

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
