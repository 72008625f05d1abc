"""Issue 10 item 1: nothing is spent for output that cannot be written, and outputs are atomic.

Every command gets the same bad outputs (a missing folder, an unknown extension, a folder in place
of a file, two options naming one file); each must exit 2 with one line, spend nothing (the
journal's bytes and ``spent`` unchanged), create nothing and leave no temp file. The good paths
write their files in one piece.
"""
from __future__ import annotations

import json
import shutil

import pytest
from conftest import leftovers, run_cli, spent, write_table


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The inputs that cost a fit (an FSIR config and upload, a model, a report), made once per module: the tests only
    read them, each from its own copies."""
    from privsdr.datasets import sir_model

    folder = tmp_path_factory.mktemp("inputs")
    X, y, _ = sir_model("M1", 600, 4, seed=3)
    table, cfg, upload = write_table(folder / "rows.csv", X, y), folder / "cfg.json", folder / "a.fsir"
    assert run_cli("fsir", "config", cfg, "--bound", 1, "--cut-points", -3, 0, 3).returncode == 0
    assert run_cli("fsir", "client", "--config", cfg, "--data", table, "--target", "y", "--client-id", "a",
                   "--epsilon", 1, "--delta", 1e-6, "--out", upload).returncode == 0
    r = run_cli("fit", "dpsir", "--data", table, "--target", "y", "--bound", 1, "--cut-points", -3, 0, 3,
                "--out", folder / "model.json", "--report", folder / "report.json")
    assert r.returncode == 0, r.stderr
    return folder


@pytest.fixture
def setup(tmp_path, inputs, journal):
    """Inputs every command needs, in this test's folder: a table, a journal, an FSIR config, an upload, a model, a
    report."""
    names = {"table": "rows.csv", "cfg": "cfg.json", "upload": "a.fsir", "model": "model.json", "report": "report.json"}
    for name in names.values():
        shutil.copyfile(inputs / name, tmp_path / name)
    (tmp_path / "adir.json").mkdir()
    (tmp_path / "adir.html").mkdir()
    return {**{key: tmp_path / name for key, name in names.items()}, "journal": journal, "tmp": tmp_path}


# command -> (argv with {OUT} where the output goes, the output's suffix); spending commands charge the journal
COMMANDS = {
    "demo --report": (["demo", "--n", 2000, "--journal", "{journal}", "--report", "{OUT}"], ".html", True),
    "fit mean-covariance --report": (["fit", "mean-covariance", "--data", "{table}", "--target", "y", "--clip", 2,
                                      "--journal", "{journal}", "--report", "{OUT}"], ".json", True),
    "fit dpsir --report": (["fit", "dpsir", "--data", "{table}", "--target", "y", "--bound", 1, "--cut-points", -3, 0, 3,
                            "--journal", "{journal}", "--report", "{OUT}"], ".html", True),
    "fit dpsir --out": (["fit", "dpsir", "--data", "{table}", "--target", "y", "--bound", 1, "--cut-points", -3, 0, 3,
                         "--journal", "{journal}", "--out", "{OUT}"], ".json", True),
    "fsir client --out": (["fsir", "client", "--config", "{cfg}", "--data", "{table}", "--target", "y", "--client-id", "b",
                           "--journal", "{journal}", "--out", "{OUT}"], ".fsir", True),
    "transform --out": (["transform", "--model", "{model}", "--data", "{table}", "--out", "{OUT}"], ".csv", False),
    "report --html": (["report", "{report}", "--html", "{OUT}"], ".html", False),
    "report --markdown": (["report", "{report}", "--markdown", "{OUT}"], ".md", False),
    "ledger show --html": (["ledger", "show", "{journal}", "--html", "{OUT}"], ".html", False),
    "fsir config": (["fsir", "config", "{OUT}", "--bound", 1, "--cut-points", -3, 0, 3], ".json", False),
    "fsir server --out": (["fsir", "server", "{upload}", "--config", "{cfg}", "--out", "{OUT}"], ".json", False),
}
BAD = {
    "missing_folder": (lambda tmp, suffix: tmp / "nonexistent" / "d" / f"out{suffix}", "does not exist"),
    "unknown_extension": (lambda tmp, suffix: tmp / "out.pdf", "unknown extension"),
    "a_folder": (lambda tmp, suffix: tmp / f"adir{suffix}", "is a folder"),
}


def argv(template, setup, out):
    return [out if a == "{OUT}" else (setup[a[1:-1]] if isinstance(a, str) and a.startswith("{") else a) for a in template]


@pytest.mark.parametrize("bad", sorted(BAD))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_bad_output_is_refused_before_anything_is_spent(command, bad, setup, cli):
    template, suffix, _ = COMMANDS[command]
    make, message = BAD[bad]
    if bad == "a_folder" and not (setup["tmp"] / f"adir{suffix}").is_dir():
        (setup["tmp"] / f"adir{suffix}").mkdir()
    out = make(setup["tmp"], suffix)
    journal = setup["journal"]
    before_bytes, before = journal.read_bytes(), spent(journal)
    files = sorted(p.name for p in setup["tmp"].iterdir())
    r = cli(*argv(template, setup, out))
    assert r.code == 2, (command, r)
    assert message in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert journal.read_bytes() == before_bytes and spent(journal) == before
    assert sorted(p.name for p in setup["tmp"].iterdir()) == files  # nothing created, no temp file
    assert not leftovers(setup["tmp"])


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_good_output_is_written_whole(command, setup, cli):
    template, suffix, spends = COMMANDS[command]
    out = setup["tmp"] / f"result{suffix}"
    journal = setup["journal"]
    before = spent(journal)
    r = cli(*argv(template, setup, out))
    assert r.code == 0, (command, r)
    assert out.is_file() and out.stat().st_size > 0
    assert not leftovers(setup["tmp"])
    after = spent(journal)
    assert (after.epsilon > before.epsilon) == spends


def test_two_options_naming_one_file_are_refused(setup, cli):
    journal = setup["journal"]
    before = journal.read_bytes()
    same = setup["tmp"] / "same.json"
    r = cli("fit", "dpsir", "--data", setup["table"], "--target", "y", "--bound", 1, "--cut-points", -3, 0, 3,
            "--journal", journal, "--out", same, "--report", same)
    assert r.code == 2 and "same file" in r.err
    r = cli("fit", "mean-covariance", "--data", setup["table"], "--clip", 2, "--journal", journal, "--report", journal)
    assert r.code == 2  # the report would overwrite the journal (unknown extension or same file: refused either way)
    assert journal.read_bytes() == before and not same.exists()


def test_reproduce_output_folder_is_checked_before_minutes_of_work(setup, cli):
    a_file = setup["tmp"] / "a_file"
    a_file.write_text("x")
    r = cli("reproduce", "dpsir-table1", "--reps", 1, "--out", a_file)
    assert r.code == 2 and "not a folder" in r.err


def test_ledger_init_in_a_missing_folder_creates_nothing(setup, cli):
    target = setup["tmp"] / "nonexistent" / "j.jsonl"
    r = cli("ledger", "init", target, "--epsilon", 1, "--delta", 1e-6)
    assert r.code == 2 and "does not exist" in r.err and not target.parent.exists()


def test_a_failure_after_the_fit_leaves_no_partial_file(setup, cli, monkeypatch):
    """Rendering fails after the charge: the charge stays (fail closed), the report file is never
    half-written and the temp file is removed."""
    from privsdr.report import PrivacyReport

    def broken(self):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(PrivacyReport, "to_html", broken)
    journal, out = setup["journal"], setup["tmp"] / "r.html"
    before = spent(journal)
    r = cli("fit", "dpsir", "--data", setup["table"], "--target", "y", "--bound", 1, "--cut-points", -3, 0, 3,
            "--journal", journal, "--report", out)
    assert r.code == 2 and "No space left" in r.err
    assert spent(journal).epsilon > before.epsilon  # the release happened: its charge is kept
    assert not out.exists() and not leftovers(setup["tmp"])


def test_report_suffix_selects_the_format(setup, cli):
    """--report out.pdf used to write JSON into a .pdf; each known suffix now gets its own format."""
    checks = {".json": lambda t: json.loads(t)["schema"] == "privsdr.privacy-report",
              ".md": lambda t: t.startswith("**CERTIFIED"),
              ".html": lambda t: t.lstrip().lower().startswith("<!doctype html")}
    for suffix, check in checks.items():
        out = setup["tmp"] / f"fit{suffix}"
        r = cli("fit", "mean-covariance", "--data", setup["table"], "--target", "y", "--clip", 2, "--report", out)
        assert r.code == 0, r.err
        assert check(out.read_text()), suffix


def test_closed_pipe_is_silent(tmp_path, cli):
    """`privsdr ledger show --json | head -1` gave a 'Broken pipe' traceback. The output here is far
    larger than a pipe's buffer, so the reader closes the pipe before the writer is done."""
    import subprocess
    import sys

    from privsdr import Budget, Ledger, Plan, Sensitivity

    path = tmp_path / "many.jsonl"
    ledger = Ledger(Budget(1000.0, 0.0), "basic", journal=path)
    plan = Plan("unit", "replace_one")
    plan.add("x", "laplace", Sensitivity(1.0, "l1"), share=Budget(1.0, 0.0))
    calibrated = plan.allocate(Budget(1.0, 0.0))
    for k in range(3):  # long run summaries make the output longer than a pipe holds
        r = ledger.reserve(calibrated)
        r.charge("x")
        r.close({"algorithm": "unit", "status": "certified", "notes": [f"note {k}-{i}" for i in range(4000)]})
    assert len(cli("ledger", "show", path, "--json").out) > 1.3 * 65536  # more than a pipe holds
    shown = subprocess.run(f"set -o pipefail; {sys.executable} -m privsdr ledger show {path} --json | head -1", shell=True,
                           executable="/bin/bash", capture_output=True, text=True)
    assert shown.stdout.strip() == "{" and shown.stderr == "" and shown.returncode == 0, shown.stderr[-300:]


def test_temp_files_a_killed_run_left_are_removed_by_the_next_write(setup, cli):
    """``kill -9`` between reserving and committing an output leaves ``.NAME.HOST.PID.ID.tmp`` behind (issue 25). The
    next command writing NAME removes those of dead processes of this host, and only those."""
    import os
    import subprocess
    import sys

    from privsdr._io import _host

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    dead_pid = int(dead.stdout)
    out = setup["tmp"] / "r.json"
    stale = setup["tmp"] / f".r.json.{_host()}.{dead_pid}.1a2b.tmp"
    live = setup["tmp"] / f".r.json.{_host()}.{os.getppid()}.3c4d.tmp"  # a live process's reservation
    other_host = setup["tmp"] / f".r.json.elsewhere.{dead_pid}.5e6f.tmp"
    for path in (stale, live, other_host):
        path.write_bytes(b"")
    r = cli("fit", "mean-covariance", "--data", setup["table"], "--target", "y", "--clip", 2, "--report", out)
    assert r.code == 0, r.err
    assert out.exists() and not stale.exists() and live.exists() and other_host.exists()
