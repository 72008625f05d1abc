"""Regression list of bad inputs (issue 10, "Measure"): every one gets one clear line on stderr,
the documented exit code (2 bad input, 1 verification failed), and spends nothing: the journal's
bytes and ``spent`` are unchanged. ``python tests/test_bad_inputs.py`` prints the table.

Each case is (id, argv, exit code, a fragment of the message). ``{d}`` is a folder prepared by
``prepare``; ``J`` is the journal every spending command is pointed at.
"""
from __future__ import annotations

import io
import json
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from replay_cases import CASES as ESTIMATOR_CASES
from replay_cases import with_blocks

FIT = ["fit", "dpsir", "--data", "{d}/rows.csv", "--target", "y", "--bound", "1", "--cut-points", "-3", "0", "3", "--journal", "{d}/J.jsonl"]
MC = ["fit", "mean-covariance", "--data", "{d}/rows.csv", "--target", "y", "--clip", "2", "--journal", "{d}/J.jsonl"]
CLIENT = ["fsir", "client", "--config", "{d}/cfg.json", "--data", "{d}/rows.csv", "--target", "y", "--client-id", "s1",
          "--journal", "{d}/J.jsonl", "--out", "{d}/s1.fsir"]
def SERVER(*uploads):
    return ["fsir", "server", "{d}/up0.fsir", *uploads, "--config", "{d}/cfg.json"]
J = ["--journal", "{d}/J.jsonl"]


def _replace(args, old, new):
    out = list(args)
    out[out.index(old) + 1] = new
    return out


def _drop(args, flag, count=1):
    i = args.index(flag)
    return args[:i] + args[i + 1 + count:]


CASES = [
    # -- outputs (item 1) -----------------------------------------------------------------------------
    ("report in a missing folder", FIT + ["--report", "{d}/nonexistent/d/r.html"], 2, "does not exist"),
    ("report with an unknown extension", FIT + ["--report", "{d}/out.pdf"], 2, "unknown extension"),
    ("report path is a folder", FIT + ["--report", "{d}/folder.json"], 2, "is a folder"),
    ("model in a missing folder", FIT + ["--out", "{d}/nonexistent/m.json"], 2, "does not exist"),
    ("model with an unknown extension", FIT + ["--out", "{d}/m.pkl"], 2, "unknown extension"),
    ("report and model in one file", FIT + ["--out", "{d}/same.json", "--report", "{d}/same.json"], 2, "same file"),
    ("upload in a missing folder", _replace(CLIENT, "--out", "{d}/nonexistent/u.fsir"), 2, "does not exist"),
    ("upload with an unknown extension", _replace(CLIENT, "--out", "{d}/u.txt"), 2, "unknown extension"),
    ("demo report with an unknown extension", ["demo", "--n", "2000", *J, "--report", "{d}/demo.pdf"], 2, "unknown extension"),
    ("ledger init in a missing folder", ["ledger", "init", "{d}/nonexistent/j.jsonl", "--epsilon", "1", "--delta", "0"], 2, "does not exist"),
    ("ledger show html with a wrong extension", ["ledger", "show", "{d}/J.jsonl", "--html", "{d}/l.txt"], 2, "unknown extension"),
    ("report html with a wrong extension", ["report", "{d}/report.json", "--html", "{d}/r.md"], 2, "unknown extension"),
    ("reproduce into a file", ["reproduce", "dpsir-table1", "--reps", "1", "--out", "{d}/rows.csv"], 2, "not a folder"),
    ("fsir config with a wrong extension", ["fsir", "config", "{d}/cfg.txt", "--bound", "1", "--cut-points", "0"], 2, "unknown extension"),
    ("transform output with a wrong extension", ["transform", "--model", "{d}/model.json", "--data", "{d}/rows.csv", "--out", "{d}/p.json"], 2, "unknown extension"),
    # -- inputs and options (item 6) ------------------------------------------------------------------
    ("data file missing", _replace(FIT, "--data", "{d}/nope.csv"), 2, "no such file"),
    ("data is a folder", _replace(FIT, "--data", "{d}/folder.json"), 2, "not a regular file"),
    ("data not UTF-8", _replace(FIT, "--data", "{d}/latin1.csv"), 2, "not UTF-8"),
    ("data empty", _replace(FIT, "--data", "{d}/empty.csv"), 2, "is empty"),
    ("data header only", _replace(FIT, "--data", "{d}/header.csv"), 2, "no rows"),
    ("data header names a column twice", _replace(FIT, "--data", "{d}/dup.csv"), 2, "more than once"),
    ("data with a text value", _replace(FIT, "--data", "{d}/text.csv"), 2, "not numeric"),
    ("data with NaN", _replace(FIT, "--data", "{d}/nan.csv"), 2, "missing or infinite"),
    ("data row with an extra field", _replace(FIT, "--data", "{d}/long_row.csv"), 2, "line 12: 6 fields, but the header has 5"),
    ("data row with a field missing", _replace(FIT, "--data", "{d}/short_row.csv"), 2, "line 12: 4 fields, but the header has 5"),
    ("target missing from the data", _replace(FIT, "--target", "zzz"), 2, "not in"),
    ("target listed among the columns", FIT + ["--columns", "x1", "y"], 2, "fitted on itself"),
    ("a column listed twice", FIT + ["--columns", "x1", "x1"], 2, "more than once"),
    ("dpsir without a target", _drop(FIT, "--target"), 2, "needs --target"),
    ("dpsir without a bound", _drop(FIT, "--bound"), 2, "needs --bound"),
    ("mean-covariance without a clip", _drop(MC, "--clip"), 2, "needs --clip"),
    ("dpsir with --bound and --bounds", FIT + ["--bounds", "{d}/bounds.json"], 2, "not both"),
    ("dpsir with a clip (a mean-covariance option)", FIT + ["--clip", "3"], 2, "does not apply"),
    ("mean-covariance with --cut-points", MC + ["--cut-points", "0"], 2, "does not apply"),
    ("dpsir without slices", _drop(FIT, "--cut-points", 3), 2, "cut_points"),
    ("--y-grid with --cut-points", FIT + ["--y-grid", "-10", "10"], 2, "not both"),
    ("--y-grid upside down", _drop(FIT, "--cut-points", 3) + ["--y-grid", "10", "-10"], 2, "LO < HI"),
    ("--n-slices contradicts --cut-points", FIT + ["--n-slices", "6"], 2, "contradicts"),
    ("cut points not increasing", _replace(FIT, "--cut-points", "3")[:-5] + ["3", "0", "-3", "--journal", "{d}/J.jsonl"], 2, "strictly increasing"),
    ("--n-directions 0", FIT + ["--n-directions", "0"], 2, "at least 1"),
    ("K not below H", FIT + ["--n-directions", "4"], 2, "n_directions"),
    ("bound not a number", _replace(FIT, "--bound", "abc"), 2, "not a number"),
    ("bound NaN", _replace(FIT, "--bound", "nan"), 2, "finite"),
    ("bound negative", _replace(FIT, "--bound", "-1"), 2, "positive"),
    ("bounds file missing a column", _drop(FIT, "--bound") + ["--bounds", "{d}/bounds_short.json"], 2, "no bound for column"),
    ("bounds file with an unknown column", _drop(FIT, "--bound") + ["--bounds", "{d}/bounds_typo.json"], 2, "not a column"),
    ("bounds file not JSON", _drop(FIT, "--bound") + ["--bounds", "{d}/page.html"], 2, "not JSON"),
    ("epsilon 0", FIT + ["--epsilon", "0"], 2, "epsilon"),
    ("delta 1.5", FIT + ["--delta", "1.5"], 2, "delta"),
    ("delta negative in exponent form", FIT + ["--delta", "-1e-6"], 2, "delta must satisfy"),
    ("accountant other than the journal's", FIT + ["--accountant", "rdp"], 2, "differs from the journal"),
    ("journal missing", _replace(FIT, "--journal", "{d}/nope.jsonl"), 2, "no such file"),
    ("journal edited", _replace(FIT, "--journal", "{d}/edited.jsonl"), 2, "modified"),
    ("journal with its last run deleted", _replace(FIT, "--journal", "{d}/truncated.jsonl"), 2, "removed from its end"),
    ("journal with a torn last line", _replace(FIT, "--journal", "{d}/torn.jsonl"), 2, "incomplete record"),
    ("unknown method", ["fit", "pca", "--data", "{d}/rows.csv"], 2, "invalid choice"),
    ("demo --n 0", ["demo", "--n", "0", *J], 2, "at least 1"),
    ("demo --n 10", ["demo", "--n", "10", *J], 2, "p < n/2"),
    ("demo --p 1", ["demo", "--p", "1", *J], 2, "at least 2"),
    ("demo --accountant other than the journal's", ["demo", "--accountant", "pld", *J], 2, "differs from the journal"),
    ("reproduce --reps 0", ["reproduce", "dpsir-table1", "--reps", "0"], 2, "at least 1"),
    ("reproduce an unknown name", ["reproduce", "nope"], 2, "unknown reproduction"),
    ("report on an HTML page", ["report", "{d}/page.html"], 2, "not a JSON privacy report"),
    ("report on another JSON", ["report", "{d}/cfg.json"], 2, "not a privsdr privacy report"),
    ("report file missing", ["report", "{d}/nope.json"], 2, "no such file"),
    ("audit --samples 0", ["audit", "gaussian", "--samples", "0"], 2, "at least 1"),
    ("audit opaque (no generic sampler)", ["audit", "opaque"], 2, "invalid choice"),
    ("audit --alpha 2", ["audit", "gaussian", "--alpha", "2"], 2, "alpha"),
    ("ledger init over a journal", ["ledger", "init", "{d}/J.jsonl", "--epsilon", "5", "--delta", "0"], 2, "already exists"),
    ("ledger init without a budget", ["ledger", "init", "{d}/new.jsonl"], 2, "required"),
    ("ledger show of a missing journal", ["ledger", "show", "{d}/nope.jsonl"], 2, "no such file"),
    ("ledger show of a CSV", ["ledger", "show", "{d}/rows.csv"], 2, "not valid JSON"),
    ("ledger verify of an edited journal", ["ledger", "verify", "{d}/edited.jsonl"], 1, None),
    ("ledger verify of a truncated journal", ["ledger", "verify", "{d}/truncated.jsonl"], 1, None),
    ("ledger repair of an edited journal", ["ledger", "repair", "{d}/edited.jsonl"], 2, "modified"),
    ("fsir config without a bound", ["fsir", "config", "{d}/c2.json", "--cut-points", "0"], 2, "needs --bound"),
    ("fsir config with a negative bound", ["fsir", "config", "{d}/c2.json", "--bound", "-1", "--cut-points", "0"], 2, "positive"),
    ("fsir config without slices", ["fsir", "config", "{d}/c2.json", "--bound", "1"], 2, "cut_points"),
    ("fsir config with unsorted cut points", ["fsir", "config", "{d}/c2.json", "--bound", "1", "--cut-points", "1", "0"], 2, "increasing"),
    ("fsir client with a malformed config", _replace(CLIENT, "--config", "{d}/page.html"), 2, "not an FSIR configuration"),
    ("fsir client with a published-VGM config", _replace(CLIENT, "--config", "{d}/vgm.json"), 2, "--allow-uncertified"),
    ("fsir client with a non-private config", _replace(CLIENT, "--config", "{d}/none.json"), 2, "--allow-uncertified"),
    ("fsir client with too few rows", _replace(CLIENT, "--data", "{d}/tiny.csv"), 2, "fewer than 2 per slice"),
    ("fsir server on an HTML file", SERVER("{d}/page.html"), 2, "not a readable FSIR message"),
    ("fsir server on a message without fields", SERVER("{d}/fields.fsir"), 2, "unexpected or missing fields"),
    ("fsir server on an upload resent under a new id", SERVER("{d}/resent.fsir"), 2, "same upload"),
    ("fsir server on n changed 600 -> 1000000", SERVER("{d}/inflated.fsir"), 2, "report says n"),
    ("fsir server on a fractional n", SERVER("{d}/fractional.fsir"), 2, "positive integer"),
    ("fsir server on a second moment x 1e6", SERVER("{d}/scaled.fsir"), 2, "implausible"),
    ("fsir server on another configuration", ["fsir", "server", "{d}/up0.fsir", "--config", "{d}/vgm.json"], 2, "another configuration"),
    ("fsir server on a VGM upload without opting in", ["fsir", "server", "{d}/vgm_up.fsir", "--config", "{d}/vgm.json"], 2, "allow-uncertified"),
    ("transform with a model that is not one", ["transform", "--model", "{d}/cfg.json", "--data", "{d}/rows.csv"], 2, "not a privsdr model file"),
    ("transform with an edited model", ["transform", "--model", "{d}/edited_model.json", "--data", "{d}/rows.csv"], 2, "modified"),
    ("transform on data without the model's columns", ["transform", "--model", "{d}/model.json", "--data", "{d}/other.csv"], 2, "not in"),
    ("transform with a mean-covariance model", ["transform", "--model", "{d}/mc.json", "--data", "{d}/rows.csv"], 2, "no transform"),
    # the vertical-party configurations: a JSON that is not an object (it used to end in an AttributeError traceback)
    ("vertical fit on a JSON list", ["vertical", "fit", "--config", "{d}/list.json", "--data", "a={d}/rows.csv", "--target", "y"], 2,
     "not a privsdr vertical configuration"),
    ("pride fit on a JSON list", ["pride", "fit", "--config", "{d}/list.json", "--data", "a={d}/rows.csv", "--target", "y"], 2,
     "not a privsdr PRIDE configuration"),
    # issue 33 item 8: tracebacks before (RecursionError; OverflowError in the distributed calibration). The secure
    # vertical cases run without --journal: a party given one spends what the journal holds, not the configuration's budget
    ("transform with a deeply nested model", ["transform", "--model", "{d}/deep.json", "--data", "{d}/rows.csv"], 2,
     "nested more than 100 levels deep"),
    ("report on a deeply nested JSON", ["report", "{d}/deep.json"], 2, "nested more than 100 levels deep"),
    ("fsir config read from a deeply nested JSON", _replace(CLIENT, "--config", "{d}/deep.json"), 2, "nested more than 100 levels deep"),
    ("fsir secure at epsilon 1e308", ["fsir", "secure", "--config", "{d}/cfg.json", "--data", "{d}/rows.csv", "{d}/rows2.csv",
                                      "--target", "y", "--epsilon", "1e308", *J], 2, "is beyond 1e+12"),
    ("vertical fit --secure at epsilon 1e308", ["vertical", "fit", "--secure", "--config", "{d}/secure_huge.json", "--data",
                                                "a={d}/va.csv", "b={d}/vb.csv", "--target", "y"], 2, "is beyond 1e+12"),
    ("vertical party --secure at epsilon 1e308", ["vertical", "party", "--secure", "--config", "{d}/secure_huge.json", "--name", "a",
                                                  "--data", "{d}/va.csv", "--target", "y", "--certs", "{d}/keys/a"], 2,
     "is beyond 1e+12"),
]


def prepare(d: Path) -> None:
    """Every file the cases refer to (quietly)."""
    import contextlib

    with contextlib.redirect_stdout(io.StringIO()):
        _prepare(d)


def _prepare(d: Path) -> None:
    from privsdr import Budget, Ledger
    from privsdr.cli import main
    from privsdr.datasets import sir_model

    X, y, _ = sir_model("M1", 600, 4, seed=3)
    rows = ["x1,x2,x3,x4,y"] + [",".join(f"{v:.6f}" for v in (*r, t)) for r, t in zip(X, y, strict=True)]
    (d / "rows.csv").write_text("\n".join(rows) + "\n")
    (d / "tiny.csv").write_text("\n".join(rows[:6]) + "\n")
    (d / "latin1.csv").write_bytes(("\n".join(rows[:50]).replace("x1", "âge") + "\n").encode("latin-1"))
    (d / "empty.csv").write_text("")
    (d / "list.json").write_text("[1, 2]\n")
    (d / "deep.json").write_text("[" * 50_000 + "]" * 50_000)  # beyond the JSON parser's recursion
    (d / "rows2.csv").write_text("\n".join(rows[:301]) + "\n")  # a second client
    (d / "va.csv").write_text("\n".join(",".join(r.split(",")[:2] + r.split(",")[4:]) for r in rows) + "\n")  # x1,x2,y
    (d / "vb.csv").write_text("\n".join(",".join(r.split(",")[2:4]) for r in rows) + "\n")  # x3,x4
    (d / "header.csv").write_text(rows[0] + "\n")
    (d / "dup.csv").write_text("\n".join([rows[0].replace("x2", "x1")] + rows[1:50]) + "\n")
    (d / "text.csv").write_text("\n".join(rows[:10] + [rows[10].replace(rows[10].split(",")[1], "n/a", 1)] + rows[11:50]) + "\n")
    (d / "long_row.csv").write_text("\n".join(rows[:11] + [rows[11] + ",1.5"] + rows[12:50]) + "\n")
    (d / "short_row.csv").write_text("\n".join(rows[:11] + [rows[11].rsplit(",", 1)[0]] + rows[12:50]) + "\n")
    (d / "nan.csv").write_text("\n".join(rows[:10] + [rows[10].replace(rows[10].split(",")[1], "nan", 1)] + rows[11:50]) + "\n")
    (d / "other.csv").write_text("a,b\n1,2\n")
    (d / "page.html").write_text("<!doctype html><html><body>a page</body></html>")
    (d / "folder.json").mkdir()
    (d / "bounds.json").write_text(json.dumps({"x1": 1, "x2": 1, "x3": 1, "x4": 1}))
    (d / "bounds_short.json").write_text(json.dumps({"x1": 1, "x2": 1}))
    (d / "bounds_typo.json").write_text(json.dumps({"x1": 1, "x2": 1, "x3": 1, "x4": 1, "x5": 1}))
    assert main(["ledger", "init", str(d / "J.jsonl"), "--epsilon", "50", "--delta", "1e-4", "--accountant", "basic"]) == 0
    assert main(["fit", "dpsir", "--data", str(d / "rows.csv"), "--target", "y", "--bound", "1", "--cut-points", "-3", "0", "3",
                 "--out", str(d / "model.json"), "--report", str(d / "report.json")]) == 0
    assert main(["fit", "mean-covariance", "--data", str(d / "rows.csv"), "--clip", "2", "--out", str(d / "mc.json")]) == 0
    assert main(["vertical", "config", str(d / "secure_huge.json"), "--secure", "--party", "a=2", "b=2", "--rows", "600", "--label",
                 "a", "--epsilon", "1e308", "--row-bound", "3", "--label-bound", "10"]) == 0  # refused when a party runs it
    assert main(["secure", "keys", str(d / "keys"), "--config", str(d / "secure_huge.json")]) == 0
    for name, extra in (("cfg", []), ("vgm", ["--mechanism", "vgm", "--calibration", "paper_approx"]),
                        ("none", ["--mechanism", "none", "--cov-mechanism", "none"])):
        assert main(["fsir", "config", str(d / f"{name}.json"), "--bound", "1", "--cut-points", "-3", "0", "3", *extra]) == 0
    for k, (cfg, extra) in enumerate((("cfg", []), ("vgm", ["--allow-uncertified"]))):
        assert main(["fsir", "client", "--config", str(d / f"{cfg}.json"), "--data", str(d / "rows.csv"), "--target", "y",
                     "--client-id", f"c{k}", "--out", str(d / ("up0.fsir" if k == 0 else "vgm_up.fsir")), *extra]) == 0
    _tampered_uploads(d)
    for name in ("edited", "truncated", "torn"):
        path = d / f"{name}.jsonl"
        ledger = Ledger(Budget(5.0, 1e-4), "basic", journal=path)
        for _ in range(2):
            assert main(["fit", "mean-covariance", "--data", str(d / "rows.csv"), "--clip", "2", "--journal", str(path)]) == 0
        del ledger
        raw = path.read_bytes()
        lines = raw.split(b"\n")[:-1]
        if name == "edited":
            path.write_bytes(raw.replace(b'"label":"mean"', b'"label":"meam"', 1))
        elif name == "truncated":
            path.write_bytes(b"\n".join(lines[:-4]) + b"\n")
        else:
            path.write_bytes(raw + lines[-1][:25])
    model = json.loads((d / "model.json").read_text())
    model["fitted"]["directions_"]["$array"]["data"][0] = 0.0
    (d / "edited_model.json").write_text(json.dumps(model))


def _tampered_uploads(d: Path) -> None:
    import attrs

    from privsdr.federated import PROTOCOL_VERSION, ClientMessage

    up = ClientMessage.load(d / "up0.fsir")
    attrs.evolve(up, client_id="someone-else").save(d / "resent.fsir")
    attrs.evolve(up, client_id="big", n=1_000_000, second_moment=up.second_moment + 1e-9).save(d / "inflated.fsir")
    attrs.evolve(up, client_id="frac", n=442.5, second_moment=up.second_moment + 2e-9).save(d / "fractional.fsir")
    attrs.evolve(up, client_id="scaled", second_moment=up.second_moment * 1e6).save(d / "scaled.fsir")
    buffer = io.BytesIO()
    np.savez(buffer, meta=np.frombuffer(json.dumps({"protocol": "privsdr.fsir", "version": PROTOCOL_VERSION}).encode(), dtype=np.uint8))
    (d / "fields.fsir").write_bytes(buffer.getvalue())


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad_inputs")
    prepare(d)
    return d


def run_case(argv, d: Path, capsys) -> tuple[int, str]:
    from privsdr.cli import main

    args = [a.replace("{d}", str(d)) for a in argv]
    capsys.readouterr()
    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    captured = capsys.readouterr()
    return code, captured.err.strip() or captured.out.strip().splitlines()[0]


@pytest.mark.parametrize("name, argv, code, fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input(name, argv, code, fragment, folder, capsys):
    from privsdr import Ledger

    journal = folder / "J.jsonl"
    before_bytes, before = journal.read_bytes(), Ledger.open(journal).spent
    got, message = run_case(argv, folder, capsys)
    assert got == code, (name, got, message)
    if fragment is not None:
        assert fragment in message, (name, message)
        assert len(message.splitlines()) == 1 and "Traceback" not in message, message
    if code != 0:
        assert journal.read_bytes() == before_bytes and Ledger.open(journal).spent == before
    for leftover in folder.rglob("*.tmp"):
        pytest.fail(f"temp file left behind: {leftover}")


# -- the Python API: privsdr errors, never plain ValueError/TypeError/ZeroDivisionError ------------------
def _api_cases():
    from privsdr import DPSIR, Budget, DPMeanCovariance, DPSparsePCA, FederatedSIR, Ledger
    from privsdr.datasets import sir_model

    X, y, _ = sir_model("M1", 400, 4, seed=0)
    ok = dict(bound=1.0, cut_points=[-3.0, 0.0, 3.0], budget=Budget(1.0, 1e-5), random_state=0)
    return [
        ("complex X", lambda: DPSIR(1, **ok).fit(X + 1j, y)),
        ("string X", lambda: DPSIR(1, **ok).fit(X.astype(str), y)),
        ("boolean X", lambda: DPMeanCovariance(clip=1.0, budget=Budget(1, 1e-5)).fit(X > 0)),
        ("object X with None", lambda: DPSparsePCA(1, sparsity=2, bound=1.0, budget=Budget(1, 1e-5)).fit(np.array([[1.0, None]] * 20))),
        ("boolean y", lambda: DPSIR(1, **ok).fit(X, y > 0)),
        ("string cut points", lambda: DPSIR(1, **{**ok, "cut_points": "abc"}).fit(X, y)),
        ("cut points and a y grid", lambda: DPSIR(1, **ok, y_grid=[0.0, 1.0, 2.0, 3.0]).fit(X, y)),
        ("unknown accountant", lambda: DPSIR(1, **ok, accountant="nope").fit(X, y)),
        ("string init_fraction", lambda: DPSIR(1, **ok, init_fraction="half").fit(X, y)),
        ("string random_state", lambda: DPSIR(1, **{**ok, "random_state": "x"}).fit(X, y)),
        ("unknown calibration", lambda: DPMeanCovariance(clip=1.0, budget=Budget(1, 1e-5), calibration="fast").fit(X)),
        ("string split", lambda: DPMeanCovariance(clip=1.0, budget=Budget(1, 1e-5), split="ab").fit(X)),
        ("plan for zero rows", lambda: DPSIR(1, **ok).plan(0, 4)),
        ("ledger with an unknown relation", lambda: Ledger((1, 1e-5), "best", None, "sideways")),
        ("FSIR string n_directions", lambda: FederatedSIR("x", bound=1.0, cut_points=[0.0], budget=Budget(1, 1e-5)).fit([(X, y)])),
        ("FSIR string cov_share", lambda: FederatedSIR(1, bound=1.0, cut_points=[0.0], cov_share="x", budget=Budget(1, 1e-5)).fit([(X, y)])),
        ("FSIR string psd_floor", lambda: FederatedSIR(1, bound=1.0, cut_points=[0.0], psd_floor="x", budget=Budget(1, 1e-5)).fit([(X, y)])),
        ("FSIR string executor", lambda: FederatedSIR(1, bound=1.0, cut_points=[0.0], executor="x", budget=Budget(1, 1e-5)).fit([(X, y)])),
        ("FSIR unseen class", lambda: FederatedSIR(1, bound=1.0, classes=[0.0, 1.0], budget=Budget(1, 1e-5)).fit([(X, y)])),
        *_huge_epsilon_cases(X, y),
    ]


def _huge_epsilon_cases(X, y, ledger=None):
    """The secure paths at epsilon = 1e308 (an OverflowError in the distributed calibration before issue 33)."""
    from privsdr import Budget, FederatedSIR, SecureVerticalRegression

    budget = dict(ledger=ledger) if ledger is not None else dict(budget=Budget(1e308, 1e-6))
    fsir = FederatedSIR(1, bound=1.0, cut_points=[-3.0, 0.0, 3.0], aggregation="secure", timeout=30.0, **budget)
    vertical = SecureVerticalRegression(row_bound=3.0, label_bound=10.0, timeout=30.0, **budget)
    return [("FSIR secure at epsilon 1e308", lambda: fsir.fit([(X[:200], y[:200]), (X[200:], y[200:])])),
            ("secure vertical at epsilon 1e308", lambda: vertical.fit([X[:, :2], X[:, 2:]], y))]


@pytest.mark.parametrize("index", range(21))
def test_python_api_raises_privsdr_errors(index):
    from privsdr.errors import PrivsdrError

    name, call = _api_cases()[index]
    with pytest.raises(PrivsdrError):
        call()


@pytest.mark.parametrize("index", range(2))
def test_a_huge_epsilon_on_a_secure_path_is_refused_like_the_analytic_gaussian_before_anything_is_charged(index):
    """As every other calibration refuses epsilon beyond MAX_EPSILON (``Budget.infinite()`` is the noise-off request)."""
    from privsdr import Budget, Ledger, ValidationError
    from privsdr.datasets import sir_model

    X, y, _ = sir_model("M1", 400, 4, seed=0)
    ledger = Ledger(Budget(1e308, 1e-6))
    name, call = _huge_epsilon_cases(X, y, ledger)[index]
    with pytest.raises(ValidationError, match=r"is beyond 1e\+12: no noise calibration is meaningful there \(use Budget.infinite"):
        call()
    assert ledger.spent.epsilon == 0.0 and ledger.spent.delta == 0.0


DEGENERATE = {
    "constant y": lambda D: {**D, "y": np.full_like(D["y"], 0.5)},
    "constant column": lambda D: {**D, "X": np.column_stack([np.full(len(D["y"]), 0.3), D["X"][:, 1:]])},
    "duplicated column": lambda D: {**D, "X": np.column_stack([D["X"][:, :1], D["X"][:, :-1]])},
    "all rows equal": lambda D: {**D, "X": np.tile(D["X"][:1], (len(D["y"]), 1)), "y": np.full_like(D["y"], D["y"][0])},
}


def _degenerate_cases() -> list:
    """Every estimator on every degenerate data set; a secure path (its parties run in this process,
    ``replay_cases.parties_here``; its post-processing is an in-memory case's, on the same releases) on the most
    degenerate one only, and the secure vertical PLS not at all (its release is the ridge case's, its post-processing
    DPPLS S2's), to keep the suite short."""
    return [pytest.param(case, kind, id=f"{case}-{kind}") for case in ESTIMATOR_CASES for kind in sorted(DEGENERATE)
            if ("secure" not in str(case).lower() or kind == "all rows equal") and str(case) != "SecureVerticalRegression, PLS"]


@pytest.mark.parametrize("case, kind", _degenerate_cases())
def test_a_data_dependent_refusal_never_tells_neighbours_apart(case, kind):
    """A certified fit either fits a degenerate data set and its neighbour with one record changed, or refuses
    both for a public reason: a refusal that one record can flip is itself a release (docs/errors.md)."""
    import privsdr

    D = with_blocks(DEGENERATE[kind](case.data(1)))
    neighbour = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in D.items()}
    neighbour["X"][0] = np.linspace(-0.9, 0.8, D["X"].shape[1])
    neighbour["y"][0] = -2.5
    neighbour = with_blocks(neighbour)
    outcomes = []
    for data in (D, neighbour):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                case.fit(case.make(), data)
                outcomes.append("fitted")
            except privsdr.PrivsdrError as exc:
                outcomes.append(f"refused: {type(exc).__name__}: {exc}")
    assert outcomes == ["fitted", "fitted"], outcomes



def test_docs_errors_lists_every_case():
    """docs/errors.md prints this list (issue 25, "Measure"): every case's command is in its table, with its exit code."""
    text = (Path(__file__).parent.parent / "docs" / "errors.md").read_text()
    table = text.split("<!-- bad-input table: start -->")[1].split("<!-- bad-input table: end -->")[0]
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in table.strip().splitlines()[2:]}
    for _name, argv, code, _ in CASES:
        shown = "`privsdr " + " ".join(a.replace("{d}/", "") for a in argv) + "`"
        assert rows.get(shown) == str(code), f"{shown} is missing from docs/errors.md or has another exit code: regenerate it"


def main_table() -> None:  # pragma: no cover - prints the table for the issue's note
    import tempfile

    from privsdr.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        prepare(d)
        print("| command | exit | message |\n|---|---|---|")
        for _name, argv, _, _ in CASES:
            err = io.StringIO()
            stdout, stderr = sys.stdout, sys.stderr
            sys.stdout, sys.stderr = io.StringIO(), err
            try:
                code = main([a.replace("{d}", str(d)) for a in argv])
            except SystemExit as exc:
                code = exc.code
            finally:
                out = sys.stdout.getvalue()
                sys.stdout, sys.stderr = stdout, stderr
            message = (err.getvalue().strip() or out.strip().splitlines()[0]).replace(str(d) + "/", "").replace("|", "\\|")
            shown = " ".join(a.replace("{d}/", "") for a in argv)
            print(f"| `privsdr {shown}` | {code} | {message} |")
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":  # pragma: no cover
    main_table()
