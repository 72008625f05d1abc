"""Replay audits: does a fit's result follow from its releases alone?

A release audit samples one mechanism; it cannot see a fit that releases a correctly noised value and then
goes on with the value's noise-free twin (post-processing of the wrong thing), or sends that twin to
another party. Noise-off tests cannot see it either (noise off, the twins are equal). The replay audit
can, by recording a fit through the release taps (``privsdr.plan.tap``) and checking:

a. **attributes follow from the releases**: the fit is run again with the data replaced by garbage of
   the same shape while every release returns the recorded output; every fitted attribute, the report's
   diagnostics and status must come out identical (``replay``, ``compare``);
b. **messages follow from the releases**: in that replay every message a party sends must be byte-equal
   to the recorded one, and a message may only name nodes its sender had released (``check_messages``);
c. **inputs follow from the rows and earlier releases**: for row-local iterative releases the recorded
   noise-free input of each release must equal an independent recomputation from the raw rows and the
   *released* earlier outputs (a case supplies it: ``check_inputs``);
d. **a release reads only the rows it is charged to**: for a node charged to a cell of a row partition
   (an init part, a batch), the fit is replayed with every row outside the rows it declares replaced by
   garbage; its noise-free input must not change (``check_scopes``).

Everything here runs fits serially in this process (the taps are process-wide; executors in other
processes would not be seen).
"""
from __future__ import annotations

import copy
import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from ..plan import tap

#: attributes that are the run's bookkeeping, not its estimate (compared through ``report_view`` instead)
BOOKKEEPING = frozenset({"privacy_report_", "ledger_", "plan_", "ledgers_", "messages_", "screening_messages_",
                         "screening_report_", "reports_", "run_", "plans_", "secure_cost_"})
#: keys of reports and summaries that differ between two runs of the same releases (ids, clocks)
VOLATILE_KEYS = frozenset({"run_id", "timestamps", "started", "finished", "report_json", "report", "before", "after",
                           "time", "seed_policy"})


class ReplayMismatch(AssertionError):
    """The replayed fit asked for a release the recording does not have (or in another order)."""


@attrs.frozen(eq=False)
class Released:
    """One release as the tap saw it: its key (run label, node), occurrence, noise-free input, output, rows read, and
    the spec it was released with (``spec.sensitivity``: what ``audit.probe.probe_releases`` checks)."""

    key: tuple[str, str]
    index: int
    value: Any
    output: Any
    rows: np.ndarray | None
    scale: float | None
    spec: Any = None


@attrs.frozen(eq=False)
class Sent:
    """One message as the tap saw it."""

    sender: str
    kind: str
    recipients: tuple[str, ...]
    arrays: Mapping[str, Any]
    nodes: tuple[str, ...]
    meta: Mapping[str, Any]
    after: int  #: how many releases the tap had seen when it was sent


def _copy(value: Any) -> Any:
    if callable(value):
        return None  # a value computed inside the mechanism (objective perturbation): not an array to compare
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - an object that cannot be copied is recorded as is
        return value


class Recorder:
    """A tap that records every release and message (the fit's outputs are left as they are)."""

    def __init__(self) -> None:
        self.releases: list[Released] = []
        self.messages: list[Sent] = []
        self._seen: dict[tuple[str, str], int] = {}

    def _index(self, key: tuple[str, str]) -> int:
        index = self._seen.get(key, 0)
        self._seen[key] = index + 1
        return index

    def released(self, key: tuple[str, str], value: Any, output: Any, spec: Any, rows: Any = None) -> Any:
        self.releases.append(Released(key, self._index(key), _copy(value), _copy(output),
                                      None if rows is None else np.asarray(rows), getattr(spec, "scale", None), spec))
        return output

    def sent(self, sender: str, kind: str, recipients: Sequence[str], arrays: Mapping[str, Any], nodes: Sequence[str],
             meta: Mapping[str, Any] | None = None) -> None:
        self.messages.append(Sent(sender, kind, tuple(recipients), {k: _copy(v) for k, v in arrays.items()}, tuple(nodes),
                                  _copy(dict(meta or {})), len(self.releases)))

    def release(self, key: tuple[str, str], index: int = 0) -> Released:
        for r in self.releases:
            if r.key == key and r.index == index:
                return r
        raise KeyError(f"no release {key} #{index} was recorded")


class Replayer(Recorder):
    """A tap that returns the recorded outputs (in the recorded order) and records what the fit computed."""

    def __init__(self, recording: Recorder) -> None:
        super().__init__()
        self._outputs = {(r.key, r.index): r.output for r in recording.releases}

    def released(self, key: tuple[str, str], value: Any, output: Any, spec: Any, rows: Any = None) -> Any:
        index = self._seen.get(key, 0)
        if (key, index) not in self._outputs:
            raise ReplayMismatch(f"the replayed fit released {key} #{index}, which the recorded fit did not: its sequence of "
                                 "releases depends on data outside the releases")
        super().released(key, value, output, spec, rows)
        return copy.deepcopy(self._outputs[(key, index)])


def record(fit: Callable[[], Any]) -> tuple[Any, Recorder]:
    """Run ``fit()`` with a recording tap; returns its result and the recording."""
    with tap.tapped(Recorder()) as recorder:
        result = fit()
    assert isinstance(recorder, Recorder)
    return result, recorder


def replay(fit: Callable[[], Any], recording: Recorder) -> tuple[Any, Replayer]:
    """Run ``fit()`` (typically on garbage data) with every release replaced by the recorded output."""
    with tap.tapped(Replayer(recording)) as replayer:
        result = fit()
    assert isinstance(replayer, Replayer)
    if len(replayer.releases) != len(recording.releases):
        raise ReplayMismatch(f"the replayed fit made {len(replayer.releases)} releases, the recorded one {len(recording.releases)}")
    return result, replayer


# -- comparing what two fits produced -----------------------------------------------------------------------
def fitted_attributes(estimator: Any, exclude: Iterable[str] = ()) -> dict[str, Any]:
    """The learned attributes (trailing underscore) of an estimator, without the bookkeeping ones."""
    skip = BOOKKEEPING | set(exclude)
    return {k: v for k, v in vars(estimator).items() if k.endswith("_") and not k.startswith("_") and k not in skip}


def report_view(report: Any) -> dict[str, Any]:
    """What a privacy report says that must follow from the releases: status, its line, the nodes' noise,
    the diagnostics and the notes (ids and clocks left out)."""
    if report is None:
        return {}
    return {"status": report.status, "status_line": report.status_line, "diagnostics": report.diagnostics,
            "notes": list(report.notes), "nodes": [(n.name, n.released, n.noise_scale) for n in report.nodes],
            "spent_by_run": report.budget.get("spent_by_run")}


def differences(a: Any, b: Any, path: str = "", ignore: frozenset[str] = frozenset()) -> list[str]:
    """Where two results differ (exactly: the replay runs the same code on the same released numbers); mapping keys in
    ``ignore`` (values a case declares outside the guarantee, e.g. diagnostics of data it does not cover) are skipped."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            if key in VOLATILE_KEYS or key in ignore:
                continue
            if key not in a or key not in b:
                out.append(f"{path}.{key}: present on one side only")
            else:
                out.extend(differences(a[key], b[key], f"{path}.{key}", ignore))
        return out
    if attrs.has(type(a)) and type(a) is type(b):
        return differences(attrs.asdict(a, recurse=False), attrs.asdict(b, recurse=False), path, ignore)
    if hasattr(a, "privacy_report_") or hasattr(a, "status_line"):
        return differences(report_view(a) if hasattr(a, "status_line") else vars(a), report_view(b) if hasattr(b, "status_line")
                           else vars(b), path, ignore)
    if isinstance(a, (np.ndarray, np.generic)) or isinstance(b, (np.ndarray, np.generic)):
        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape or x.dtype.kind != y.dtype.kind:
            return [f"{path}: shape/dtype {x.shape} {x.dtype} != {y.shape} {y.dtype}"]
        same = np.array_equal(x, y, equal_nan=True) if x.dtype.kind in "fc" else np.array_equal(x, y)
        return [] if same else [f"{path}: arrays differ (max |diff| {_max_diff(x, y)})"]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [d for i, (u, v) in enumerate(zip(a, b, strict=True)) for d in differences(u, v, f"{path}[{i}]", ignore)]
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return []
    try:
        equal = bool(a == b)
    except Exception:  # noqa: BLE001 - objects without a usable ==
        equal = repr(a) == repr(b)
    return [] if equal else [f"{path}: {a!r} != {b!r}"]


def _max_diff(x: np.ndarray, y: np.ndarray) -> str:
    try:
        return f"{float(np.nanmax(np.abs(x.astype(float) - y.astype(float)))):.3g}"
    except (TypeError, ValueError):
        return "n/a"


def check_messages(recorded: Recorder, replayed: Recorder) -> list[str]:
    """(b): every message of the replay byte-equal to the recorded one; a message names only released nodes."""
    problems = []
    if len(recorded.messages) != len(replayed.messages):
        return [f"{len(recorded.messages)} messages recorded, {len(replayed.messages)} in the replay"]
    for i, (m0, m1) in enumerate(zip(recorded.messages, replayed.messages, strict=True)):
        where = f"message {i} ({m0.sender} -> {', '.join(m0.recipients)}, {m0.kind})"
        if (m0.sender, m0.kind, m0.recipients, m0.nodes) != (m1.sender, m1.kind, m1.recipients, m1.nodes):
            problems.append(f"{where}: header differs in the replay")
            continue
        for name in sorted(set(m0.arrays) | set(m1.arrays)):
            a, b = m0.arrays.get(name), m1.arrays.get(name)
            if a is None or b is None or np.asarray(a).tobytes() != np.asarray(b).tobytes() or np.shape(a) != np.shape(b):
                problems.append(f"{where}: array {name!r} is not a function of the releases (it changed with the data)")
        problems.extend(f"{where}: metadata {d}" for d in differences(m0.meta, m1.meta))
        released = {r.key[1] for r in recorded.releases[: m0.after]}
        unreleased = [n for n in m0.nodes if n not in released and not any(n.endswith("/" + r) or r.endswith("/" + n)
                                                                           for r in released)]
        if unreleased:
            problems.append(f"{where}: names nodes {unreleased} that were not released before it was sent")
    return problems


def check_inputs(recording: Recorder, references: Mapping[str, Callable[[Released, Recorder], Any]], *,
                 rtol: float = 1e-9, atol: float = 1e-12) -> list[str]:
    """(c): each release whose node name matches a key of ``references`` (a suffix match on the node) has the
    noise-free input ``reference(release, recording)`` computes from the raw rows and earlier *released* outputs."""
    problems, checked = [], 0
    for r in recording.releases:
        for pattern, reference in references.items():
            if not _matches(r.key[1], pattern) or r.value is None:
                continue
            expected = reference(r, recording)
            if expected is None:
                continue
            checked += 1
            got, want = np.asarray(r.value, dtype=float), np.asarray(expected, dtype=float)
            if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol):
                problems.append(f"{r.key[1]} #{r.index}: its noise-free input is not what the raw rows and the released earlier "
                                f"outputs give (max |diff| {_max_diff(got.ravel(), want.ravel()) if got.shape == want.shape else 'shape'})")
    if references and not checked:
        problems.append(f"no release matched the references {sorted(references)}")
    return problems


def _matches(node: str, pattern: str) -> bool:
    if pattern.endswith("*"):
        return node.startswith(pattern[:-1]) or ("/" + pattern[:-1]) in node
    return node == pattern or node.endswith("/" + pattern)


def check_scopes(fit_on: Callable[[Any], Any], data: Any, n_rows: int, recording: Recorder,
                 perturb: Callable[[Any, np.ndarray], Any]) -> list[str]:
    """(d): for each release that declared the rows it reads, replay the fit with every *other* row of the
    ``n_rows`` replaced (``perturb(data, rows_to_replace)``) and check that the release's noise-free input did
    not change."""
    problems = []
    for r in recording.releases:
        if r.rows is None or r.value is None:
            continue
        others = np.setdiff1d(np.arange(n_rows), r.rows)
        if others.size == 0:
            continue
        changed = perturb(data, others)
        _, again = replay(functools.partial(fit_on, changed), recording)
        value = again.release(r.key, r.index).value
        if differences(r.value, value):
            problems.append(f"{r.key[1]} #{r.index} is charged to {r.rows.size} rows but its value changed when the other "
                            f"{others.size} rows changed: it reads records it is not charged to")
    return problems
