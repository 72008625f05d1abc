"""Issue 10 item 5 through the command line: a journal notices a missing tail, `ledger repair`
recovers from a torn last line without lowering spent, and a key detects a consistent rewrite."""
from __future__ import annotations

import json

import pytest

from privsdr import Ledger
from privsdr.accounting.journal import head_line, head_path, record_hash


@pytest.fixture
def charged(tmp_path, cli):
    """A journal with two demo runs charged to it."""
    path = tmp_path / "budget.jsonl"
    assert cli("ledger", "init", path, "--epsilon", 3, "--delta", 1e-5, "--accountant", "best").code == 0
    for _ in range(2):
        assert cli("demo", "--n", 2000, "--journal", path).code == 0
    return path


def test_deleting_the_last_run_is_detected_by_verify_show_and_fit(charged, cli, sir_table):
    spent = Ledger.open(charged).spent
    lines = charged.read_bytes().split(b"\n")[:-1]
    last_reserve = max(i for i, line in enumerate(lines) if b'"type":"reserve"' in line)
    charged.write_bytes(b"\n".join(lines[:last_reserve]) + b"\n")  # the last run's records are gone
    r = cli("ledger", "verify", charged)
    assert r.code == 1 and "TAMPERED" in r.out and "removed from its end" in r.out
    assert cli("ledger", "show", charged).code == 2
    r = cli("fit", "mean-covariance", "--data", sir_table, "--target", "y", "--clip", 2, "--journal", charged)
    assert r.code == 2 and "removed from its end" in r.err  # nothing is charged against a lowered spent
    charged.write_bytes(b"\n".join(lines) + b"\n")
    assert cli("ledger", "verify", charged).code == 0 and Ledger.open(charged).spent == spent


def test_repair_a_torn_last_line(charged, cli):
    spent = Ledger.open(charged).spent
    intact = charged.read_bytes()
    charged.write_bytes(intact + b'{"hash":"9f3c","label":"step_2","prev":"')  # killed in the middle of a write
    r = cli("ledger", "verify", charged)
    assert r.code == 1 and "ledger repair" in r.out
    r = cli("ledger", "repair", charged)
    assert r.code == 0 and "removed a torn last line" in r.out
    assert charged.read_bytes() == intact and Ledger.open(charged).spent == spent
    assert cli("ledger", "verify", charged).code == 0
    assert "nothing to repair" in cli("ledger", "repair", charged).out
    charged.write_bytes(intact.replace(b'"label":"slice_sums"', b'"label":"slice_sumz"', 1) + b"{")
    r = cli("ledger", "repair", charged)
    assert r.code == 2 and "modified" in r.err  # repair is not a way around tamper detection


def test_a_key_detects_a_whole_file_rewrite(tmp_path, cli, monkeypatch):
    monkeypatch.setenv("PRIVSDR_JOURNAL_KEY", "a long secret only the data steward knows")
    path = tmp_path / "keyed.jsonl"
    assert "HMAC-keyed" in cli("ledger", "init", path, "--epsilon", 3, "--delta", 1e-5).out
    assert cli("demo", "--n", 2000, "--journal", path).code == 0
    records = [json.loads(line) for line in path.read_text().splitlines()][:1]  # drop the run ...
    prev = "0" * 64
    for r in records:  # ... and recompute every hash (and the head) without the key
        r.pop("mac"), r.pop("key_id")
        r["prev"] = prev
        r["hash"] = prev = record_hash(r)
    path.write_text("".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in records))
    head_path(path).write_text(head_line(1, prev) + "\n")
    r = cli("ledger", "verify", path)
    assert r.code == 1 and "not keyed" in r.out
    monkeypatch.delenv("PRIVSDR_JOURNAL_KEY")
    assert cli("ledger", "verify", path).code == 0  # without the key the rewrite cannot be told apart


def test_init_help_names_the_journal_total():
    from privsdr.cli import build_parser

    parser = build_parser()
    ledger_sub = next(a for a in parser._subparsers._group_actions[0].choices["ledger"]._actions if a.dest == "ledger_command")
    text = ledger_sub.choices["init"].format_help()
    assert "total budget" in text and "of this fit" not in text


def test_show_and_verify_work_on_read_only_storage_and_a_fit_there_is_refused(charged, cli, monkeypatch):
    """An archived journal on storage this process cannot write (no PATH.lock can be created): show and verify read it
    (under a shared lock on an existing lock file, or none), and a fit that would append is refused before any noise.
    The storage is simulated (the suite may run as root, for whom permissions do not bind)."""
    import errno
    import os

    before = charged.read_bytes()
    (charged.parent / (charged.name + ".lock")).unlink()
    real_open, real_access = os.open, os.access

    def read_only_open(path, flags, *args):
        if flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR | os.O_APPEND):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", read_only_open)
    monkeypatch.setattr(os, "access", lambda path, mode, *a, **k: False if mode & os.W_OK else real_access(path, mode))
    shown = cli("ledger", "show", charged)
    assert shown.code == 0 and "spent ε = 1.9" in shown.out and "over 2 runs" in shown.out
    verified = cli("ledger", "verify", charged)
    assert verified.code == 0 and verified.out.startswith("OK")
    refused = cli("demo", "--n", 2000, "--journal", charged)
    assert refused.code != 0
    monkeypatch.undo()
    assert charged.read_bytes() == before and not (charged.parent / (charged.name + ".lock")).exists()


def test_a_fit_asking_for_more_delta_than_the_journal_says_what_it_was_charged_and_show_adds_up(tmp_path, cli, sir_table):
    """Issue 25's delta rule on screen: the fit says what its (eps, delta) became at the journal's delta, and
    `ledger show` prints spent and remaining that add up to the budget, with what "spent" means."""
    path = tmp_path / "budget.jsonl"
    assert cli("ledger", "init", path, "--epsilon", 3, "--delta", 1e-4).code == 0
    r = cli("fit", "dpsir", "--data", sir_table, "--target", "y", "--bound", 1, "--cut-points", -3, 0, 3, "--epsilon", 1,
            "--delta", 5e-4, "--journal", path)
    assert r.code == 0, r.err
    assert "asked for delta = 0.0005, more than the journal's delta = 0.0001" in r.out and "charged as eps = " in r.out
    shown = cli("ledger", "show", path)
    assert shown.code == 0 and "what spent means" in shown.out and "spent ε + remaining ε = the budget's ε" in shown.out
    summary = Ledger.open(path).summary()
    assert summary["spent"]["epsilon"] + summary["remaining"]["epsilon"] == pytest.approx(3.0)
