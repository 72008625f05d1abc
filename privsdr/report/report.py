"""PrivacyReport: one per fit or run; versioned JSON that round-trips.

The report is plain data (built by ``privsdr.plan`` when a run closes) so that this module depends
on nothing else of privsdr (but ``privsdr._json``, which reads JSON safely). Field by field documentation: ``docs/report.md``.
"""
from __future__ import annotations

import json
import math
from typing import Any

import attrs

from .._json import parse_json

SCHEMA = "privsdr.privacy-report"
SCHEMA_VERSION = 2
#: versions this code reads (a version-1 report is read with empty diagnostics)
READABLE_VERSIONS = (1, 2)


FLOAT_TAG = "$float"


def _num(x: Any) -> Any:
    """JSON has no inf/nan: encode them as ``{"$float": "inf"}`` so files stay standard JSON and
    user strings such as ``"inf"`` are never confused with numbers."""
    if isinstance(x, float) and not math.isfinite(x):
        return {FLOAT_TAG: "inf" if x > 0 else ("-inf" if x < 0 else "nan")}
    if isinstance(x, dict):
        return {k: _num(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_num(v) for v in x]
    return x


#: the fitted attributes that are the released estimate, in the order a filing lists them
ESTIMATE_ATTRIBUTES = ("directions_", "components_", "eigenvalues_", "coef_", "intercept_", "mean_", "covariance_", "var_",
                       "scale_", "support_", "cut_points_")


def released_estimate(estimator: Any) -> dict[str, Any]:
    """The estimate a fitted estimator released (its ``ESTIMATE_ATTRIBUTES`` that are set), for ``with_filing``."""
    return {name: getattr(estimator, name) for name in ESTIMATE_ATTRIBUTES if getattr(estimator, name, None) is not None}


def _plain(x: Any) -> Any:
    """An estimate as JSON numbers: arrays (anything with ``tolist``) as nested lists, numpy scalars as floats."""
    if hasattr(x, "tolist"):
        return x.tolist()
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _plain_fields(x: Any) -> Any:
    """``attrs.asdict(x)`` (every attrs instance a dict of its fields, tuples and lists as new lists, dicts copied),
    ``_num`` applied on the way (one pass over a report instead of two: every client upload serialises one)."""
    if x is None or isinstance(x, (str, int)):  # (bool is an int)
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else _num(x)
    if isinstance(x, dict):
        return {k: _plain_fields(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain_fields(v) for v in x]
    fields = getattr(type(x), "__attrs_attrs__", None)
    if fields is not None:
        return {f.name: _plain_fields(getattr(x, f.name)) for f in fields}
    return x


def _attrs_fields(x: Any) -> dict[str, Any]:
    """The JSON encoder's hook: an attrs instance (a node record) as the dict of its fields, as ``_plain_fields`` gives."""
    fields = getattr(type(x), "__attrs_attrs__", None)
    if fields is None:
        raise TypeError(f"Object of type {type(x).__name__} is not JSON serializable")
    return {f.name: getattr(x, f.name) for f in fields}


def _denum(x: Any) -> Any:
    if isinstance(x, dict):
        if set(x) == {FLOAT_TAG}:
            return float(x[FLOAT_TAG])
        return {k: _denum(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_denum(v) for v in x]
    return x


#: the privacy unit of each relation in plain language (what a data-protection officer files)
PLAIN_UNITS = {
    "replace_one": "one person's row replaced by another person's (the number of rows is public)",
    "add_remove": "one person's row added or removed (the number of rows is protected too)",
    "replace_entry": "one cell of one person's row changed (one attribute value; not the whole row)",
    "lsdp_zero_row": "NOT a standard DP unit: only the actual data set and its copies with one row zero-filled",
}
#: the data digest identifies the input exactly: it is for the filing, not covered by the guarantee
DIGEST_NOTE = ("the sha256 identifies the input file exactly (anyone holding the file can check it); it is not covered "
               "by the privacy guarantee: file it with the report, do not publish it")


@attrs.frozen
class NodeReport:
    name: str
    mechanism: str
    status: str
    calibration: str
    sensitivity: dict[str, Any]
    noise_multiplier: float
    noise_scale: float
    cost: dict[str, float]
    scope: str
    parents: list[str]
    share: dict[str, float] | None = None
    params: dict[str, Any] = attrs.field(factory=dict)
    released: bool = True
    description: str = ""
    #: ``numpy`` (floating-point noise) or ``secure`` (exact discrete noise on a public grid; CKS 2020)
    sampler: str = "numpy"


@attrs.frozen
class PrivacyReport:
    """What a run released and what it cost. ``to_json()``/``from_json()`` round-trip exactly."""

    status: str
    status_line: str
    algorithm: str
    algorithm_version: str
    run_id: str
    plan_hash: str
    relation: str
    public_parameters: dict[str, Any]
    data_shape: list[int] | None
    budget: dict[str, Any]
    accountant: dict[str, Any]
    totals: dict[str, dict[str, float] | None]
    nodes: list[NodeReport]
    seed_policy: str
    timestamps: dict[str, str]
    library_versions: dict[str, str]
    notes: list[str] = attrs.field(factory=list)
    #: post-processing facts about the released estimate (e.g. the error the noise alone induces); no cost
    diagnostics: dict[str, Any] = attrs.field(factory=dict)
    model: dict[str, Any] | None = None  #: the model file this report belongs to (format, digest), if saved
    #: what the guarantee covers when it is not every output of the fit (e.g. "the messages between parties;
    #: not the coefficients"); None: it covers every output. The status line says it too.
    coverage: str | None = None
    #: a secure computation's trust model (who must not collude, what each party sees, what is opened); None otherwise
    trust_model: dict[str, Any] | None = None
    #: what the filer adds (``with_filing``): ``purpose``, ``data`` (file name, sha256, note), ``estimate`` (the released
    #: estimate as numbers); None when nothing was added
    filing: dict[str, Any] | None = None
    schema: str = SCHEMA
    schema_version: int = SCHEMA_VERSION

    # -- serialisation ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return _plain_fields(self._top_level())

    def _top_level(self) -> dict[str, Any]:
        """The report's fields in ``to_dict``'s order, without the optional ones that are None, values as they are."""
        data = {f.name: getattr(self, f.name) for f in attrs.fields(type(self))}
        for optional in ("model", "coverage", "trust_model", "filing"):
            if data[optional] is None:
                del data[optional]  # reports without them keep exactly their earlier form
        order = ["schema", "schema_version", "status", "status_line"]
        return {**{k: data[k] for k in order}, **{k: v for k, v in data.items() if k not in order}}

    @property
    def unit(self) -> str:
        """The privacy unit in plain language (``PLAIN_UNITS``), from the relation the guarantee is stated under."""
        return PLAIN_UNITS.get(self.relation, f"the {self.relation!r} neighbouring relation")

    def with_filing(self, *, purpose: str | None = None, data_file: str | None = None, data_sha256: str | None = None,
                    estimate: dict[str, Any] | None = None) -> PrivacyReport:
        """This report with what a filing needs beside the guarantee: the ``purpose`` of the release, the data set it was
        computed on (a file name, and its sha256 only when asked for: see ``DIGEST_NOTE``) and the released ``estimate`` (name -> numbers;
        arrays as nested lists). Post-processing and context: no cost, the guarantee is unchanged."""
        filing = dict(self.filing or {})
        if purpose is not None:
            filing["purpose"] = str(purpose)
        if data_file is not None or data_sha256 is not None:
            filing["data"] = {"file": data_file, **({"sha256": data_sha256, "note": DIGEST_NOTE} if data_sha256 is not None else {})}
        if estimate is not None:
            filing["estimate"] = {k: _plain(v) for k, v in estimate.items()}
        return attrs.evolve(self, filing=filing or None)

    def not_private(self, reason: str) -> PrivacyReport:
        """This report relabelled NOT PRIVATE for a cause the run itself could not see (``reason``; e.g. the fit sat in a
        scikit-learn Pipeline behind a step fitted on the rows without noise, ``privsdr._pipeline``): status
        ``none`` and every node ``none``, the status line and a note give the reason. The releases, their noise and what
        they cost the ledger are unchanged (the totals are still charged). Idempotent: the same reason is added once."""
        note = f"not private: {reason}"
        if note in self.notes:
            return self
        spent = self.budget["spent_by_run"]
        if self.status == "none" and self.status_line.startswith("NOT PRIVATE: "):
            rest = self.status_line[len("NOT PRIVATE: "):]
        else:
            rest = (f"the totals, (epsilon={spent['epsilon']:.4g}, delta={spent['delta']:.3g}) under the "
                    f"{self.accountant.get('name')!r} accountant, {self.relation}, price the noise for the values the estimator "
                    "was given, not a guarantee for the rows they were computed from")
        nodes = [attrs.evolve(n, status="none") for n in self.nodes]
        return attrs.evolve(self, status="none", status_line=f"NOT PRIVATE: {reason}; {rest}", nodes=nodes,
                            notes=[*self.notes, note])

    def to_json(self, indent: int | None = 2) -> str:
        """``json.dumps(self.to_dict())``. Written in one pass when every float is finite (the encoder turns the node
        records into dicts as it meets them and refuses inf and NaN), else through ``to_dict``, which tags them (``_num``):
        every client upload carries one."""
        try:
            return json.dumps(self._top_level(), indent=indent, sort_keys=False, allow_nan=False, default=_attrs_fields)
        except ValueError:  # an inf or NaN somewhere: its {"$float": ...} tag
            return json.dumps(self.to_dict(), indent=indent, sort_keys=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrivacyReport:
        data = _denum(dict(data))
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a privsdr privacy report (schema {data.get('schema')!r})")
        if data.get("schema_version") not in READABLE_VERSIONS:
            raise ValueError(f"unsupported report schema version {data.get('schema_version')!r}; this privsdr reads {READABLE_VERSIONS}")
        data["schema_version"] = SCHEMA_VERSION
        try:
            data["nodes"] = [NodeReport(**n) for n in data["nodes"]]
            return cls(**data)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed privacy report: {exc}") from None

    @classmethod
    def from_json(cls, text: str) -> PrivacyReport:
        try:
            data = parse_json(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not a JSON privacy report ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
        if not isinstance(data, dict):
            raise ValueError("not a privsdr privacy report (the JSON is not an object)")
        return cls.from_dict(data)

    def to_markdown(self) -> str:
        from .render import to_markdown

        return to_markdown(self)

    def to_html(self) -> str:
        """A self-contained HTML page (embedded chart, no network assets); needs matplotlib."""
        from .render import to_html

        return to_html(self)

    # -- reading ----------------------------------------------------------------------------------
    @property
    def spent(self) -> tuple[float, float]:
        s = self.budget["spent_by_run"]
        return s["epsilon"], s["delta"]

    def summary(self) -> str:
        """A few lines for a terminal: status, budget, totals per accountant, nodes."""
        lines = [self.status_line, f"algorithm: {self.algorithm} (privsdr {self.algorithm_version}); relation: {self.relation}"]
        b = self.budget
        lines.append(
            "budget: total (eps={:.4g}, delta={:.3g}); remaining before (eps={:.4g}, delta={:.3g}), after (eps={:.4g}, delta={:.3g})".format(
                b["total"]["epsilon"], b["total"]["delta"], b["before"]["epsilon"], b["before"]["delta"],
                b["after"]["epsilon"], b["after"]["delta"],
            )
        )
        # which theorems justify spent_by_run and "after" (reports written before issue 15 do not say)
        run, ledger = b.get("run_composition"), b.get("composition")
        parts = [f"this run non-adaptively under {run.get('accountant')!r} ({run.get('citation')})"] if run else []
        if ledger and ledger.get("rule") == "non_adaptive":
            parts.append("the ledger total non-adaptively too (one run, or one batch of plans declared up front)")
        elif ledger:
            parts.append(f"the ledger across {ledger.get('groups')} runs or batches by the privacy filter {ledger.get('rule')}, "
                         f"whose budget is the guarantee ('after' is the room it leaves) ({ledger.get('citation')})")
        if parts:
            lines.append("composition: " + "; ".join(parts))
        totals = ", ".join(
            f"{name}: eps={t['epsilon']:.4g} (delta={t['delta']:.3g})" if t else f"{name}: n/a" for name, t in self.totals.items()
        )
        lines.append(f"this run composed under each accountant -> {totals}")
        for n in self.nodes:
            lines.append(
                f"  - {n.name}: {n.mechanism}/{n.calibration} [{n.status}] sensitivity {n.sensitivity['value']:.4g} "
                f"({n.sensitivity['norm']}), noise scale {n.noise_scale:.4g}, cost eps={n.cost['epsilon']:.4g} "
                f"delta={n.cost['delta']:.3g}, scope {n.scope}" + (", secure sampler" if n.sampler == "secure" else "")
                + ("" if n.released else " (not released)")
            )
        for key, text in self.diagnostics.get("messages", {}).items():
            lines.append(f"diagnostic ({key}): {text}")
        lines.append(f"seed policy: {self.seed_policy}")
        if self.model:
            lines.append(f"model file: {self.model.get('format')} digest {self.model.get('digest')}")
        return "\n".join(lines)
