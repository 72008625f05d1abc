"""The privsdr command: main job, journals shared by concurrent processes, bad input, reports."""
import json
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import run_cli

from privsdr import Ledger

CLI = [sys.executable, "-m", "privsdr"]


def run(*args, cwd=None):
    """The command in this process (``conftest.run_cli``); ``subprocess_run`` where the process itself matters."""
    return run_cli(*args, cwd=cwd)


def subprocess_run(*args, cwd=None):
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd)


def test_help_teaches_the_commands():
    out = subprocess_run("--help")  # the real entry point, through a fresh interpreter
    assert out.returncode == 0
    for word in ("demo", "fit", "ledger", "report", "audit", "exit codes"):
        assert word in out.stdout
    assert "--journal" in run("demo", "--help").stdout


def test_demo_prints_estimate_report_and_writes_files(tmp_path):
    html, js = tmp_path / "demo.html", tmp_path / "demo.json"
    out = run("demo", "--n", 20000, "--report", html)
    assert out.returncode == 0, out.stderr
    assert "true direction" in out.stdout and "DP-SIR estimate" in out.stdout and "CERTIFIED" in out.stdout
    page = html.read_text()
    assert page.index("CERTIFIED") < page.index("<h1>")  # status line first
    assert "data:image/png;base64," in page
    assert not re.search(r"(src|href)=['\"]https?:", page)  # self-contained: no network assets
    assert run("demo", "--n", 20000, "--report", js).returncode == 0
    data = json.loads(js.read_text())
    assert data["schema"] == "privsdr.privacy-report" and data["status"] == "certified"
    rendered = tmp_path / "again.html"
    assert run("report", js, "--html", rendered).returncode == 0
    assert "data:image/png;base64," in rendered.read_text()


def _demo_process(journal: str) -> None:
    """A forked child runs ``privsdr demo`` (the command's own code; only the interpreter start is skipped)."""
    import contextlib
    import io
    import os

    from privsdr.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(["demo", "--journal", journal, "--n", "2000"])
    os._exit(code)


def test_five_concurrent_demos_against_a_journal_for_three(tmp_path):
    import multiprocessing

    journal = tmp_path / "budget.jsonl"
    assert run("ledger", "init", journal, "--epsilon", 3, "--delta", 3e-6, "--accountant", "basic").returncode == 0
    fork = multiprocessing.get_context("fork")
    procs = [fork.Process(target=_demo_process, args=(str(journal),)) for _ in range(5)]
    try:
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=120)
    finally:
        for p in procs:  # end exactly the processes this test started, also when it fails
            if p.is_alive():
                p.kill()
                p.join()
    codes = sorted(p.exitcode for p in procs)
    assert codes == [0, 0, 0, 3, 3]
    ledger = Ledger.open(journal)
    assert len([r for r in ledger.runs if r.charged]) == 3
    assert ledger.spent.fits_within(ledger.budget)
    assert run("ledger", "verify", journal).returncode == 0
    # editing one byte makes verify fail
    text = journal.read_bytes()
    i = text.index(b'"noise_multiplier":') + len(b'"noise_multiplier":') + 1
    journal.write_bytes(text[:i] + (b"7" if text[i:i + 1] != b"7" else b"8") + text[i + 1:])
    bad = run("ledger", "verify", journal)
    assert bad.returncode == 1 and "TAMPERED" in bad.stdout


def test_demo_refuses_without_budget_and_spends_nothing(tmp_path):
    journal = tmp_path / "small.jsonl"
    run("ledger", "init", journal, "--epsilon", 0.5, "--delta", 1e-6)
    before = journal.read_bytes()
    out = run("demo", "--journal", journal, "--n", 2000)
    assert out.returncode == 3 and "refused" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert journal.read_bytes() == before


def test_ledger_show_and_html(tmp_path):
    journal = tmp_path / "l.jsonl"
    run("ledger", "init", journal, "--epsilon", 2, "--delta", 1e-5)
    run("demo", "--journal", journal, "--n", 2000)
    shown = run("ledger", "show", journal, "--json")
    data = json.loads(shown.stdout)
    assert data["budget"] == {"epsilon": 2.0, "delta": 1e-5} and len(data["runs"]) == 1
    assert data["runs"][0]["status"] == "certified"
    page = tmp_path / "ledger.html"
    assert run("ledger", "show", journal, "--html", page).returncode == 0
    assert "LEDGER:" in page.read_text() and "data:image/png;base64," in page.read_text()


@pytest.fixture
def table(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((500, 3))
    path = tmp_path / "rows.csv"
    lines = ["a,b,c,y"] + [f"{r[0]},{r[1]},{r[2]},{r.sum()}" for r in X]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_fit_on_csv(table, tmp_path):
    journal = tmp_path / "f.jsonl"
    run("ledger", "init", journal, "--epsilon", 1, "--delta", 1e-6)
    out = run("fit", "mean-covariance", "--data", table, "--target", "y", "--clip", 3, "--epsilon", 1, "--delta", 1e-6,
              "--journal", journal, "--report", tmp_path / "fit.md")
    assert out.returncode == 0, out.stderr
    assert "columns: a, b, c" in out.stdout and "CERTIFIED" in (tmp_path / "fit.md").read_text()


@pytest.mark.parametrize("problem", ["missing_file", "non_numeric", "nan", "unknown_method", "no_clip", "bad_delta", "missing_column"])
def test_bad_input_is_one_line_nonzero_and_spends_nothing(problem, table, tmp_path):
    journal = tmp_path / "g.jsonl"
    run("ledger", "init", journal, "--epsilon", 1, "--delta", 1e-6)
    before = journal.read_bytes()
    data = table
    args = ["fit", "mean-covariance", "--data", data, "--clip", 3, "--epsilon", 1, "--delta", 1e-6, "--journal", journal]
    if problem == "missing_file":
        args[3] = tmp_path / "nope.csv"
    elif problem in ("non_numeric", "nan"):
        bad = tmp_path / "bad.csv"
        rows = table.read_text().splitlines()
        rows[5] = rows[5].replace(rows[5].split(",")[1], "oops" if problem == "non_numeric" else "nan", 1)
        bad.write_text("\n".join(rows) + "\n")
        args[3] = bad
    elif problem == "unknown_method":
        args[1] = "no-such-method"
    elif problem == "no_clip":
        args = [a for a in args if a not in ("--clip", 3)]
    elif problem == "bad_delta":
        args[args.index("--delta") + 1] = 1.5
    elif problem == "missing_column":
        args += ["--target", "zzz"]
    out = run(*args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith(("privsdr: error", "usage:"))
    assert journal.read_bytes() == before


def test_ledger_init_refuses_to_overwrite(tmp_path):
    journal = tmp_path / "x.jsonl"
    assert run("ledger", "init", journal, "--epsilon", 1, "--delta", 0).returncode == 0
    out = run("ledger", "init", journal, "--epsilon", 5, "--delta", 0)
    assert out.returncode == 2 and "already exists" in out.stderr


def test_html_report_renders_in_headless_chromium_with_the_chart(tmp_path):
    """As a person would see it: a screenshot shows the status banner and the blue bars of the chart."""
    import shutil

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    import matplotlib.image as mpimg

    page, shot = tmp_path / "demo.html", tmp_path / "demo.png"
    assert run("demo", "--n", 20000, "--report", page).returncode == 0
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,1400", f"--screenshot={shot}",
                    page.as_uri()], capture_output=True, timeout=120)
    pixels = mpimg.imread(shot)[..., :3]
    bar_blue = np.all(np.abs(pixels - np.array([0x2B, 0x6C, 0xB0]) / 255) < 0.03, axis=-1)
    assert bar_blue.sum() > 5_000  # the chart's bars are on screen
    banner = np.all(np.abs(pixels - np.array([0xE6, 0xFF, 0xFA]) / 255) < 0.02, axis=-1)
    assert banner[:200].sum() > 10_000  # the certified status banner is at the top


def test_fit_dpsir_on_csv(tmp_path):
    from privsdr.datasets import sir_model

    X, y, _ = sir_model("M1", 4000, 4, seed=1)
    path = tmp_path / "sir.csv"
    path.write_text("x1,x2,x3,x4,y\n" + "\n".join(",".join(f"{v:.6f}" for v in (*row, t)) for row, t in zip(X, y, strict=True)) + "\n")
    out = run("fit", "dpsir", "--data", path, "--target", "y", "--bound", 1, "--y-grid", -30, 30, "--epsilon", 1, "--delta", 1e-6,
              "--report", tmp_path / "sir.json")
    assert out.returncode == 0, out.stderr
    assert "directions" in out.stdout and "CERTIFIED" in out.stdout
    missing = run("fit", "dpsir", "--data", path, "--bound", 1, "--y-grid", -30, 30)
    assert missing.returncode == 2 and "--target" in missing.stderr
    no_slices = run("fit", "dpsir", "--data", path, "--target", "y", "--bound", 1)
    assert no_slices.returncode == 2 and "cut_points" in no_slices.stderr


def test_fsir_client_server_round_trip(tmp_path):
    from privsdr.datasets import fsir_model

    B = None
    for k in range(2):
        X, y, B = fsir_model("III", 1500, 6, seed=k, B=B)
        rows = ["x0,x1,x2,x3,x4,x5,y"] + [",".join(f"{v:.6f}" for v in (*r, t)) for r, t in zip(X, y, strict=True)]
        (tmp_path / f"c{k}.csv").write_text("\n".join(rows) + "\n")
    cfg = tmp_path / "cfg.json"
    assert run("fsir", "config", cfg, "--bound", 3, "--cut-points", -1, 0, 1, "--n-directions", 2).returncode == 0
    for k in range(2):
        out = run("fsir", "client", "--config", cfg, "--data", tmp_path / f"c{k}.csv", "--target", "y", "--client-id", f"s{k}",
                  "--epsilon", 2, "--delta", 1e-5, "--out", tmp_path / f"m{k}.fsir")
        assert out.returncode == 0, out.stderr
    merged = run("fsir", "server", tmp_path / "m0.fsir", tmp_path / "m1.fsir", "--config", cfg, "--json")
    assert merged.returncode == 0, merged.stderr
    data = json.loads(merged.stdout)
    assert np.asarray(data["directions"]).shape == (6, 2) and data["privacy"]["status"] == "certified"
    other = tmp_path / "other.json"
    run("fsir", "config", other, "--bound", 2, "--cut-points", -1, 0, 1)
    refused = run("fsir", "server", tmp_path / "m0.fsir", "--config", other)
    assert refused.returncode == 2 and "configuration" in refused.stderr


def test_every_option_and_argument_of_every_command_has_help_text():
    import argparse

    from privsdr.cli import build_parser

    silent = []

    def walk(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])
            elif not action.help and action.dest != "help":
                silent.append(" ".join([*path, *(action.option_strings or [action.dest])]))

    walk(build_parser(), ["privsdr"])
    assert not silent, silent


def test_demo_write_data_writes_example_rows_and_spends_nothing(tmp_path, cli):
    """Issue 25: the README's journal example fits on rows the user can make (`demo --write-data`)."""
    out = tmp_path / "rows.csv"
    r = cli("demo", "--write-data", out, "--n", 300, "--p", 3)
    assert r.code == 0 and "nothing was fitted or spent" in r.out, r.err
    lines = out.read_text().splitlines()
    assert lines[0] == "x1,x2,x3,y" and len(lines) == 301
    assert np.all(np.abs(np.loadtxt(out, delimiter=",", skiprows=1)[:, :3]) <= 1.0)
    other = tmp_path / "new.csv"
    assert cli("demo", "--write-data", other, "--n", 300, "--p", 3, "--data-seed", 1).code == 0
    assert other.read_text() != out.read_text()
    journal = tmp_path / "j.jsonl"
    assert cli("ledger", "init", journal, "--epsilon", 1, "--delta", 1e-6).code == 0
    refused = cli("demo", "--write-data", tmp_path / "x.csv", "--journal", journal)
    assert refused.code == 2 and "--write-data only writes rows" in refused.err
