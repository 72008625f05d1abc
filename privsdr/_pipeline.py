"""Which steps of a scikit-learn ``Pipeline`` read the private rows without noise (issue 25 item 3).

A step *reads the rows* when its fitted state is computed from the training rows' values: ``StandardScaler`` (means,
sds), ``MinMaxScaler`` (min, max), ``PCA``, ``SimpleImputer``, any regressor or classifier. Such a step in front of a
privsdr estimator voids its guarantee (the estimator is fitted on a function of statistics that were never noised);
after it, the pipeline's model is not private although the privsdr step's release is.

A step is *public* when it reads nothing of the rows but their number of columns and names: ``"passthrough"``/``None``/
``"drop"``, ``PublicRangeScaler``, and the stateless scikit-learn steps of ``persistence.PUBLIC_SKLEARN_STEPS``
(``FunctionTransformer`` with no function or a numpy ufunc, ``Normalizer``, ``Binarizer``; the very classes, not
subclasses). A privsdr estimator is a *private* step (its own report says what it guarantees). Anything else is
treated as reading the rows: the rule is an allow-list, so an unknown step is never taken for public. A caller who
knows better (a ``FunctionTransformer`` with a row-local function of public constants) names it in ``public=``.

Nested ``Pipeline`` steps are spliced in order; ``FeatureUnion`` and ``ColumnTransformer`` run their parts side by
side, so such a step reads the rows if any part does and is private if any part is.

The fit-time warning (``NonPrivatePreprocessingWarning``) is best effort: scikit-learn passes a step no reference to
its Pipeline, so a privsdr fit looks for a ``sklearn.pipeline.Pipeline`` on its call stack that holds it (the very
object: a Pipeline fits its steps in place unless it caches with ``memory=``, and a ``ColumnTransformer`` fits clones,
which only their own nested Pipeline can see). ``check_pipeline`` is the definitive check.
"""
from __future__ import annotations

import sys
import warnings
from collections.abc import Iterable, Iterator
from types import FrameType
from typing import Any

import attrs

from .errors import InputTypeError, NonPrivatePreprocessingWarning, ValidationError
from .persistence import public_sklearn_step
from .report import PrivacyReport

ADVICE = ("use privsdr.preprocessing.PublicRangeScaler (declared public ranges, free) or DPStandardScaler (a DP mean and "
          "variance, charged to the ledger) instead")


@attrs.frozen
class PipelineProblem:
    """One step fitted on the rows without noise: its ``step`` path ("scale", or "columns/num" inside a
    composite), its class name (``estimator``), the privsdr step it feeds (``feeds``: None when no private step
    follows it) and a ``message`` saying what that means."""

    step: str
    estimator: str
    feeds: str | None
    message: str


def _is_pipeline(step: Any) -> bool:
    module = sys.modules.get("sklearn.pipeline")
    return module is not None and isinstance(step, module.Pipeline)


def _parts(step: Any, fitted: bool = False) -> list[tuple[str, Any]] | None:
    """The parts of a FeatureUnion or ColumnTransformer (with ``fitted``, also the fitted clones), else None."""
    listed = getattr(step, "transformer_list", None)
    if listed is None and hasattr(step, "transformers") and hasattr(step, "remainder"):
        listed = [(name, trans) for name, trans, _ in step.transformers]
        if fitted:
            listed += [(name, trans) for name, trans, _ in getattr(step, "transformers_", [])]
        if not isinstance(step.remainder, str):
            listed.append(("remainder", step.remainder))
    return None if listed is None else list(listed)


def _leaves(path: str, step: Any, fitted: bool = False) -> Iterator[tuple[str, Any]]:
    """(path, step) of every non-composite step inside ``step`` (with ``fitted``, the fitted clones too)."""
    parts = step.steps if _is_pipeline(step) else _parts(step, fitted)
    if parts is None:
        yield path, step
        return
    for name, part in parts:
        yield from _leaves(f"{path}/{name}", part, fitted)


def _sequence(steps: Iterable[tuple[str, Any]], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """The pipeline's steps in order, nested Pipelines spliced in."""
    for name, step in steps:
        if _is_pipeline(step):
            yield from _sequence(step.steps, f"{prefix}{name}/")
        else:
            yield prefix + name, step


def kind(step: Any, path: str = "", public: Iterable[str] = ()) -> str:
    """``"public"``, ``"private"`` (a privsdr estimator) or ``"reads"`` (fitted on the rows without noise) for one
    non-composite step (module docstring)."""
    if step is None or (isinstance(step, str) and step in ("passthrough", "drop")):
        return "public"
    if isinstance(getattr(type(step), "privacy_report_", None), PrivacyRecord):  # a privsdr estimator (``_sklearn``)
        return "public" if getattr(type(step), "model_public", False) else "private"
    if path in set(public) or public_sklearn_step(step):
        return "public"
    return "reads"


def _problem(path: str, step: Any, feeds: str | None) -> PipelineProblem:
    name = type(step).__name__
    if feeds is not None:
        message = (f"step {path!r} ({name}) is fitted on the rows without noise and feeds the privsdr step {feeds!r}: {feeds!r} "
                   f"is then fitted on a function of statistics that were never noised, and its privacy guarantee does not hold; "
                   f"{ADVICE}")
    else:
        message = (f"step {path!r} ({name}) is fitted on the rows without noise: its fitted state (and the pipeline's model) is "
                   "not covered by any privacy guarantee")
    return PipelineProblem(path, name, feeds, message)


def _scan(steps: Iterable[tuple[str, Any]], prefix: str, declared: set[str], downstream: str | None) -> list[PipelineProblem]:
    """The problems of a sequence of steps; ``downstream``: the private step after the whole sequence, if any."""
    items = list(_sequence(steps, prefix))
    problems = []
    for i, (path, step) in enumerate(items):
        feeds = next((p for p, later in items[i + 1:] if any(kind(leaf, lp, declared) == "private" for lp, leaf in _leaves(p, later))),
                     downstream)
        problems += _scan_step(path, step, declared, feeds)
    return problems


def _scan_step(path: str, step: Any, declared: set[str], feeds: str | None) -> list[PipelineProblem]:
    """One step: a leaf, or the parts of a FeatureUnion/ColumnTransformer side by side (a part that is a Pipeline is
    scanned in order)."""
    parts = _parts(step)
    if parts is None:
        return [_problem(path, step, feeds)] if kind(step, path, declared) == "reads" else []
    problems = []
    for name, part in parts:
        if _is_pipeline(part):
            problems += _scan(part.steps, f"{path}/{name}/", declared, feeds)
        else:
            problems += _scan_step(f"{path}/{name}", part, declared, feeds)
    return problems


def check_pipeline(pipe: Any, *, public: Iterable[str] = (), strict: bool = True) -> list[PipelineProblem]:
    """The steps of ``pipe`` (a scikit-learn ``Pipeline``, fitted or not) that are fitted on the rows without noise.

    ``public``: step paths the caller declares public (row-local functions of public constants). With ``strict``
    (default) any problem raises ``ValidationError`` listing them all; otherwise the list is returned ([] when the
    pipeline reads the rows only through privsdr's private steps)."""
    if not _is_pipeline(pipe):
        raise InputTypeError(f"check_pipeline takes a sklearn.pipeline.Pipeline, got {type(pipe).__name__}")
    problems = _scan(pipe.steps, "", set(public), None)
    if strict and problems:
        raise ValidationError("the pipeline reads the private rows without noise:\n" + "\n".join(f"  - {p.message}" for p in problems))
    return problems


def _contains(step: Any, target: Any) -> bool:
    return any(leaf is target for _, leaf in _leaves("", step, fitted=True))


def _enclosing_pipelines(estimator: Any, depth: int = 80) -> list[Any]:
    """The Pipelines on the call stack (innermost first) that hold ``estimator`` itself."""
    module = sys.modules.get("sklearn.pipeline")
    if module is None:
        return []
    pipeline_globals = vars(module)  # a frame of sklearn.pipeline's code runs in this very dict (one identity test a frame)
    found: list[Any] = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and depth > 0:
        if frame.f_globals is pipeline_globals:
            owner = frame.f_locals.get("self")
            if _is_pipeline(owner) and not any(owner is p for p in found) and _contains(owner, estimator):
                found.append(owner)
        frame, depth = frame.f_back, depth - 1
    return found


def reading_steps_before(pipe: Any, estimator: Any) -> list[tuple[str, str]]:
    """(path, class name) of the steps fitted on the rows without noise that come before ``estimator`` in ``pipe``."""
    items = list(_sequence(pipe.steps))
    position = next((i for i, (_, step) in enumerate(items) if _contains(step, estimator)), None)
    if position is None:
        return []
    return [(path, type(leaf).__name__) for item_path, step in items[:position] for path, leaf in _leaves(item_path, step)
            if kind(leaf, path) == "reads"]


def reading_steps_seen(estimator: Any) -> dict[str, str]:
    """path -> class name of the steps fitted on the rows without noise before ``estimator`` in the Pipelines on the call
    stack (best effort: module docstring); {} for a public step or a fit outside any Pipeline."""
    if getattr(type(estimator), "model_public", False):
        return {}
    seen: dict[str, str] = {}
    for pipe in _enclosing_pipelines(estimator):
        seen.update(reading_steps_before(pipe, estimator))
    return seen


def _steps_text(seen: dict[str, str]) -> str:
    return ", ".join(f"{path!r} ({name})" for path, name in seen.items())


def not_private_reason(seen: dict[str, str]) -> str:
    """The reason a report behind these steps gives for its status ``none`` (``PrivacyReport.not_private``)."""
    return (f"fitted in a scikit-learn Pipeline after step(s) fitted on the rows without noise ({_steps_text(seen)}): the "
            "releases are functions of statistics that were never noised, so no privacy guarantee holds for this pipeline")


def _relabelled(value: Any, reason: str) -> Any:
    """A report (or a mapping of reports, or a protocol summary with a ``status``) relabelled NOT PRIVATE."""
    if isinstance(value, PrivacyReport):
        return value.not_private(reason)
    if isinstance(value, dict):
        out = {key: _relabelled(item, reason) for key, item in value.items()}
        if "status" in out:
            out.update(status="none", not_private=reason)
        return out
    return value


def relabelled_behind_reading_steps(estimator: Any, value: Any) -> Any:
    """``value`` (a privacy record being set on ``estimator`` during its fit) relabelled NOT PRIVATE when the fit sits in
    a Pipeline after a step fitted on the rows without noise, else unchanged: the label follows the warning
    (``warn_if_behind_reading_steps``, the same detection)."""
    seen = reading_steps_seen(estimator)
    return _relabelled(value, not_private_reason(seen)) if seen else value


def warn_if_behind_reading_steps(estimator: Any) -> None:
    """At the end of a privsdr fit: ``NonPrivatePreprocessingWarning`` when a Pipeline on the call stack fitted a step
    on the rows without noise before this estimator (best effort: module docstring). Its privacy records are relabelled
    NOT PRIVATE by the same detection (``relabelled_behind_reading_steps``, called from ``privsdr._sklearn``)."""
    seen = reading_steps_seen(estimator)
    if seen:
        warnings.warn(f"{type(estimator).__name__} was fitted in a scikit-learn Pipeline after step(s) fitted on the rows "
                      f"without noise: {_steps_text(seen)}. It was fitted on a function of statistics that were never noised, so its "
                      f"privacy guarantee does not hold for this pipeline and its privacy report says NOT PRIVATE; {ADVICE} "
                      "(privsdr.check_pipeline(pipe) lists every such step)", NonPrivatePreprocessingWarning, stacklevel=4)


class PrivacyRecord:
    """A fitted privacy record attribute (``privacy_report_``, ``privacy_reports_``, ``privacy_``), kept in the instance's
    ``__dict__`` under its own name (so ``vars``, pickling and scikit-learn's fitted check see a plain attribute). A value
    set while the fit sits in a scikit-learn Pipeline behind a step fitted on the rows without noise is stored
    relabelled NOT PRIVATE (``relabelled_behind_reading_steps``): the label follows the warning for
    every estimator, whichever order its fit sets the report and records its features in. Relabelling only ever lowers
    a label, so a loaded model keeps the label it was saved with."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        try:
            return obj.__dict__[self.name]
        except KeyError:
            raise AttributeError(f"{type(obj).__name__!r} object has no attribute {self.name!r}") from None

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.name] = relabelled_behind_reading_steps(obj, value)

    def __delete__(self, obj: Any) -> None:
        try:
            del obj.__dict__[self.name]
        except KeyError:
            raise AttributeError(self.name) from None
