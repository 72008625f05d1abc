"""The replay harness on every certified estimator, mode and path (``tests/replay_cases.py``).

(a) every fitted attribute, diagnostic, report line and warning follows from the releases alone (a replay on garbage
data with the recorded outputs gives the same); (b) every message is a release or post-processing of releases;
(c) row-local iterative releases read the raw rows and *released* earlier outputs only; (d) a release charged
to part of the rows reads only those. The same cases drive the refusal check of ``tests/test_bad_inputs.py``.
"""
from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
from replay_cases import CASES, garbage, replace_rows

import privsdr
from privsdr.audit.replay import (
    check_inputs,
    check_messages,
    check_scopes,
    differences,
    fitted_attributes,
    record,
    replay,
    report_view,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")  # noise warnings at these tiny sizes are expected


def _report(est):
    return getattr(est, "privacy_report_", None)


class _Recorded(dict):
    """Case name -> (data, fitted estimator, recording, warnings), each case fitted on first use only: a worker of
    the parallel suite fits the cases it runs, not all of them."""

    def __missing__(self, name: str):
        case = next(c for c in CASES if c.name == name)
        D = case.data(0)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            est, recording = record(lambda: case.fit(case.make(), D))
        self[name] = value = (D, est, recording, _warned(seen))
        return value


@pytest.fixture(scope="module")
def recorded():
    """Each case fitted once on its data, with every release and message recorded (shared by the checks)."""
    return _Recorded()


def _warned(seen) -> list[tuple[str, str]]:
    """The messages about the fit (FreshBudgetWarning is about the process's earlier fits, not about this one's releases)."""
    return [(w.category.__name__, str(w.message)) for w in seen if w.category.__name__ != "FreshBudgetWarning"]


def _covered(warned: list[tuple[str, str]], case) -> list[tuple[str, str]]:
    return [w for w in warned if not w[1].startswith(case.uncovered_warnings or ("\0",))]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_attributes_and_messages_follow_from_the_releases_alone(case, recorded):
    D, est, recording, warned = recorded[case.name]
    assert recording.releases, "the case released nothing: the harness would check nothing"
    junk = garbage(D, np.random.default_rng(99))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        again, replayed = replay(lambda: case.fit(case.make(), junk), recording)
    attrs0 = fitted_attributes(est, exclude=case.uncovered)
    attrs1 = fitted_attributes(again, exclude=case.uncovered)
    ignore = frozenset(case.uncovered_keys)
    problems = differences(attrs0, attrs1, "attributes", ignore)
    problems += differences(report_view(_report(est)), report_view(_report(again)), "report", ignore)
    problems += check_messages(recording, replayed)
    # what the user is told follows from the releases too (warnings about uncovered outputs aside)
    problems += differences(_covered(warned, case), _covered(_warned(seen), case), "warnings")
    assert not problems, "\n".join(problems[:10])


@pytest.mark.parametrize("case", [c for c in CASES if c.uncovered], ids=str)
def test_what_the_guarantee_does_not_cover_is_said_and_really_is_uncovered(case, recorded):
    """A case may leave attributes out of (a) only if its reports say the guarantee does not cover them; and the
    exclusion must be real (they do change with the data), or it would hide nothing and should go."""
    D, est, recording, _ = recorded[case.name]
    reports = getattr(est, "privacy_reports_", None) or {"": _report(est)}
    for report in reports.values():
        if report is not None and report.status == "certified":
            assert case.uncovered_said in report.status_line, report.status_line
    again, _ = replay(lambda: case.fit(case.make(), garbage(D, np.random.default_rng(98))), recording)
    changed = [a for a in case.uncovered if differences(getattr(est, a, None), getattr(again, a, None))]
    assert changed, f"{case.uncovered} follow from the releases after all: remove them from the case"
    if case.uncovered_keys:  # the report entries left out must exist and change with the data too
        views = [report_view(r) for r in (getattr(est, "privacy_reports_", None) or {}).values()]
        views_again = [report_view(r) for r in (getattr(again, "privacy_reports_", None) or {}).values()]
        assert any(k in v["diagnostics"] for v in views for k in case.uncovered_keys), "no report carries the uncovered keys"
        assert differences(views, views_again), "the uncovered report entries follow from the releases after all"


@pytest.mark.parametrize("case", [c for c in CASES if c.references], ids=str)
def test_row_local_releases_read_the_rows_and_released_outputs_only(case, recorded):
    D, est, recording, _ = recorded[case.name]
    problems = check_inputs(recording, case.references(D, est))
    assert not problems, "\n".join(problems[:10])


@pytest.mark.parametrize("case", [c for c in CASES if c.scopes], ids=str)
def test_a_release_charged_to_part_of_the_rows_reads_only_those(case, recorded):
    D, est, recording, _ = recorded[case.name]
    scoped = [r for r in recording.releases if r.rows is not None]
    assert scoped, "the case declares row scopes but no release said which rows it reads"
    problems = check_scopes(lambda data: case.fit(case.make(), data), D, len(D["y"]), recording, replace_rows)
    assert not problems, "\n".join(problems[:10])


def _same_record(a, b) -> list[str]:
    return differences({"arrays": dict(a.arrays), "scales": dict(a.scales), "n": a.n, "relation": a.relation},
                       {"arrays": dict(b.arrays), "scales": dict(b.scales), "n": b.n, "relation": b.relation}, "released_")


@pytest.mark.parametrize("case", [c for c in CASES if c.consumer], ids=str)
def test_the_fitted_state_is_its_consumer_on_the_released_record_alone(case, recorded):
    """(e): the fit's ``released_`` holds every release the fit made, as released (no output reaches the post-processing
    around it, no noise-free value inside it; ``extra["outside_record"]``: releases a party spends on its own noise and
    never uploads),
    and the estimator's ``*_from_released`` on that record alone (stored and read back: no plan, no run, no rows)
    gives every fitted attribute, report diagnostic and warning the fit gave."""
    import json

    from privsdr.released import Released

    D, est, recording, warned = recorded[case.name]
    released = est.released_
    made = {r.key[1].rsplit("/", 1)[-1] for r in recording.releases} - set(case.extra.get("outside_record", ()))
    assert set(released.nodes.values()) == made, "the Released record is not every release of the fit"
    outputs: dict[str, list] = {}
    for r in recording.releases:
        outputs.setdefault(r.key[1].rsplit("/", 1)[-1], []).append(np.asarray(r.output, dtype=float).ravel())
    if case.extra.get("pooled"):  # the FSIR server's record pools what each client released and uploaded
        from privsdr.federated.server import CLIENT_ARRAYS, client_released, merged_released

        problems = [f"an upload's {name} is not what its client released" for name, node in CLIENT_ARRAYS.items()
                    if getattr(est.messages_[0], name) is not None
                    and differences([np.ravel(getattr(m, name)) for m in est.messages_], outputs[node])]
        problems += _same_record(merged_released([client_released(m, m.report) for m in est.messages_]), released)
    else:
        problems = [f"released_[{name!r}] is not what node {node!r} released" for name, node in released.nodes.items()
                    if differences([np.asarray(released[name], dtype=float).ravel()], outputs[node])]
    assert not problems, "\n".join(problems)
    stored = Released.from_dict(json.loads(json.dumps(released.to_dict())))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fitted = case.consumer(est, stored)
    assert not seen, "a consumer returns its warnings, it does not raise them"
    problems = _same_record(fitted.attributes["released_"], released)
    problems += differences({k: getattr(est, k, None) for k in fitted.attributes if k != "released_"},
                            {k: v for k, v in fitted.attributes.items() if k != "released_"}, "attributes")
    report = _report(est).diagnostics
    for d in fitted.diagnostics:
        problems += differences(report["messages"].get(d.key), d.message, f"report message {d.key}")
        problems += differences({k: report.get(k) for k in d.values}, dict(d.values), f"report {d.key}")
    said = [(c.__name__, m) for c, m in fitted.warnings]
    problems += [f"warning {w} of the consumer was not raised by the fit" for w in said if w not in warned]
    assert not problems, "\n".join(problems[:10])


def _certified_modes(cls) -> set[str]:
    """The certified modes/paths a class must have cases for (public constants and documented paths)."""
    name = cls.__name__
    known = {
        "DPSIR": {"moments", "onepass", "chunked", "dask"},
        "SparseDPSIR": {"certified", "onepass"},
        "DPSparsePCA": {"certified", "onepass"},
        "DPMeanCovariance": {"certified", "chunked"},
        "DPStandardScaler": {"certified"},
        "PublicRangeScaler": set(),  # releases nothing: its fit keeps the columns' number and names only
        "DPPLS": {"certified", "certified_iterative", "chunked"},
        "AdaSSPRegression": {"certified", "chunked", "published"},
        "MSC": {"dp_mean"},
        "FederatedSIR": {"iid", "vgm_two_stage", "screening", "secure"},
        "DPBCDRegression": {"certified"},
        "PRIDERegressor": {"certified"},
        "SecureVerticalRegression": {"certified", "pls"},
    }
    return known[name]


def test_every_certified_path_is_registered():
    """Every public estimator (and MSC) has a case for each of its certified modes and data paths."""
    from privsdr.algorithms.spectral import MSC

    classes = [getattr(privsdr, n) for n in privsdr.__all__]
    estimators = [c for c in classes if inspect.isclass(c) and hasattr(c, "fit")] + [MSC]
    covered = {c.covers for c in CASES}
    missing = [(cls.__name__, mode) for cls in estimators for mode in sorted(_certified_modes(cls))
               if (cls.__name__, mode) not in covered and not (mode == "dask" and not any(c.covers[1] == "dask" for c in CASES))]
    assert not missing, f"no replay case for {missing}: add them to tests/replay_cases.py"
    from privsdr.algorithms.pls import MODES as PLS_MODES
    from privsdr.vertical.dpbcd import MODES as BCD_MODES

    assert {m for m in PLS_MODES if m.startswith("certified")} <= _certified_modes(privsdr.DPPLS)
    assert {m for m in BCD_MODES if m == "certified"} <= _certified_modes(privsdr.DPBCDRegression)
