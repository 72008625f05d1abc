"""The persistent ledger journal: exact resumption, tamper detection, several processes and
threads sharing one budget, crash safety (SIGKILL) and run summaries.

Every budget is a multiple of 1/128 and every node costs exactly 1/128 under the basic
accountant, so composition is exact in binary floating point: a budget of 120/128 fits exactly
120 one-node runs and ``spent`` can be compared with ``==``.
"""
from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import signal
import threading
import time
import traceback
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privsdr import Budget, BudgetExceededError, Ledger, Plan, Run, Sensitivity
from privsdr.accounting.journal import Journal, JournalError, head_line, head_path, repair, verify

UNIT = 1 / 128
N_FIT = 120
BUDGET_120 = Budget(N_FIT * UNIT, 0.0)
FORK = multiprocessing.get_context("fork")
CHILD_TIMEOUT = 30.0


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def unit_plan(name: str = "unit"):
    """One pure Laplace node costing exactly 1/128."""
    p = Plan(name, "replace_one")
    p.add("x", "laplace", Sensitivity(1.0, "l1"), share=Budget(UNIT, 0.0))
    return p.allocate(Budget(UNIT, 0.0))


def multi_plan(labels=("a", "b", "c"), name: str = "tri"):
    """Independent pure Laplace nodes, 1/128 each (basic composition: len(labels)/128)."""
    p = Plan(name, "replace_one")
    for label in labels:
        p.add(label, "laplace", Sensitivity(1.0, "l1"), share=Budget(UNIT, 0.0))
    return p.allocate(Budget(len(labels) * UNIT, 0.0))


def run_unit(ledger: Ledger, cp, seed: int = 0) -> None:
    with Run(cp, ledger, random_state=seed) as run:
        run.release("x", 0.0)


def reserve_unit(ledger: Ledger, cp) -> None:
    r = ledger.reserve(cp)
    r.charge("x")
    r.close()


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().split(b"\n") if line]


def count_type(path: Path, kind: str) -> int:
    return sum(1 for r in read_records(path) if r["type"] == kind)


def state(ledger: Ledger):
    """Everything a reopened ledger must reproduce."""
    return (
        ledger.spent,
        ledger.remaining,
        ledger.charges,
        [(r.run_id, r.plan, r.charges, r.pid, r.host, r.started, list(r.charged), r.closed, dict(r.summary)) for r in ledger.runs],
        {k: list(v) for k, v in ledger.reserved.items()},
    )


def cost_tuple(epsilon: float, delta: float = 0.0) -> tuple[float, float]:
    return (epsilon, delta)


def wait_for(conn, expected: str, proc) -> None:
    assert conn.poll(CHILD_TIMEOUT), f"child {proc.pid} never signalled (exitcode={proc.exitcode})"
    msg = conn.recv()
    assert msg == expected, msg


def kill_and_reap(proc) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(CHILD_TIMEOUT)
    assert proc.exitcode == -signal.SIGKILL
    # reaped: the pid no longer exists (a zombie would still answer kill(pid, 0))
    with pytest.raises(ProcessLookupError):
        os.kill(proc.pid, 0)


# ---------------------------------------------------------------------------------------------
# 1. Reopening resumes exactly; mismatches are refused, never silently reset
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1, 5])
def test_reopen_resumes_exactly(tmp_path, k):
    path = tmp_path / "ledger.jsonl"
    budget = Budget(8 * UNIT, 0.0)
    ledger = Ledger(budget, accountant="basic", journal=path)
    cp = unit_plan()
    for i in range(k):
        if i % 2:
            run_unit(ledger, cp, seed=i)
        else:
            reserve_unit(ledger, cp)
    assert ledger.spent == cost_tuple(k * UNIT)
    assert ledger.remaining == cost_tuple((8 - k) * UNIT)
    assert len(ledger.charges) == k
    assert count_type(path, "charge") == k

    before = state(ledger)
    by_open = Ledger.open(path)
    by_ctor = Ledger(Budget(8 * UNIT, 0.0), accountant="basic", journal=path)
    assert state(by_open) == before
    assert state(by_ctor) == before
    assert by_open.budget == budget and by_open.accountant.to_dict() == {"name": "basic"}

    # the reopened ledger continues exactly where the journal stopped: 8 - k more fit, then refusal
    for i in range(8 - k):
        run_unit(by_open, cp, seed=100 + i)
    assert by_open.spent == cost_tuple(8 * UNIT)
    assert by_open.remaining == cost_tuple(0.0)
    with pytest.raises(BudgetExceededError):
        run_unit(by_open, cp)
    with pytest.raises(BudgetExceededError):
        by_ctor.reserve(cp)
    # the older objects see the records appended through the new one
    assert ledger.spent == by_ctor.spent == cost_tuple(8 * UNIT)
    assert len(ledger.charges) == len(by_ctor.charges) == 8
    ok, msg, n = verify(path)
    assert ok, msg
    assert n == 1 + 3 * 8


def test_reopen_with_mismatched_budget_or_accountant_is_refused(tmp_path):
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(BUDGET_120, accountant="basic", journal=path)
    for _ in range(3):
        reserve_unit(ledger, unit_plan())
    raw = path.read_bytes()

    mismatches = [
        dict(budget=Budget(121 * UNIT, 0.0), accountant="basic"),
        dict(budget=Budget(N_FIT * UNIT, 1e-6), accountant="basic"),
        dict(budget=Budget(1.0, 0.0), accountant="basic"),
        dict(budget=BUDGET_120, accountant="rdp"),
        dict(budget=BUDGET_120, accountant="best"),
    ]
    for kwargs in mismatches:
        with pytest.raises(JournalError):
            Ledger(kwargs.pop("budget"), journal=path, **kwargs)
        assert path.read_bytes() == raw  # not reset, not appended to

    with pytest.raises(JournalError):
        Ledger.create(path, BUDGET_120, "basic")
    with pytest.raises(JournalError):
        Ledger.create(path, Budget(2.0, 0.0), "rdp")
    assert path.read_bytes() == raw

    # the journal still holds the original spend
    again = Ledger.open(path)
    assert again.spent == cost_tuple(3 * UNIT)
    assert again.remaining == cost_tuple((N_FIT - 3) * UNIT)


def test_reopen_with_mismatched_relation_in_header_is_refused(tmp_path):
    path = tmp_path / "ledger.jsonl"
    Ledger(BUDGET_120, accountant="basic", journal=path, relation="replace_one")
    raw = path.read_bytes()
    with pytest.raises(JournalError):
        Ledger(BUDGET_120, accountant="basic", journal=path, relation="add_remove")
    assert path.read_bytes() == raw
    assert Ledger.open(path).relation.value == "replace_one"


def add_remove_unit_plan():
    p = Plan("unit-ar", "add_remove")
    p.add("x", "laplace", Sensitivity(1.0, "l1", "add_remove"), share=Budget(UNIT, 0.0))
    return p.allocate(Budget(UNIT, 0.0))


def test_reopen_with_a_relation_other_than_the_journals_charges_is_refused(tmp_path):
    """The journal was created without a relation; its first reservation fixed it to
    replace_one (as for an in-memory ledger, which then refuses add_remove plans). Reopening it
    with relation="add_remove" must not let add_remove charges be composed with those."""
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(BUDGET_120, accountant="basic", journal=path)
    reserve_unit(ledger, unit_plan())
    assert ledger.relation.value == "replace_one"
    assert Ledger.open(path).relation.value == "replace_one"
    raw = path.read_bytes()
    try:
        other = Ledger(BUDGET_120, accountant="basic", journal=path, relation="add_remove")
    except JournalError:
        assert path.read_bytes() == raw
        return
    # accepted: it must at least refuse to compose add_remove charges with the replace_one ones
    try:
        reserve_unit(other, add_remove_unit_plan())
    finally:
        relations = {c.relation.value for c in Ledger.open(path).charges}
    assert relations == {"replace_one"}, f"one journal now composes {sorted(relations)} charges"


def test_create_and_open_edge_cases(tmp_path):
    path = tmp_path / "new.jsonl"
    with pytest.raises(JournalError):
        Ledger.open(path)  # nothing there
    created = Ledger.create(path, Budget(4 * UNIT, 0.0), "basic")
    assert path.exists()
    recs = read_records(path)
    assert len(recs) == 1 and recs[0]["type"] == "header"
    assert recs[0]["budget"] == {"epsilon": 4 * UNIT, "delta": 0.0}
    assert recs[0]["accountant"] == {"name": "basic"}
    assert created.spent == cost_tuple(0.0)
    assert created.remaining == cost_tuple(4 * UNIT)
    reopened = Ledger.open(path)
    assert reopened.spent == cost_tuple(0.0)
    assert reopened.remaining == cost_tuple(4 * UNIT)
    assert reopened.runs == []


# ---------------------------------------------------------------------------------------------
# 2. Tamper detection
# ---------------------------------------------------------------------------------------------
def build_tamper_journal(tmp_path: Path) -> Path:
    """header, a 2-node run charged on both nodes, a full Run: 1 + 4 + 3 records."""
    path = tmp_path / "orig.jsonl"
    ledger = Ledger(Budget(8 * UNIT, 0.0), accountant="basic", journal=path)
    r = ledger.reserve(multi_plan(("a", "b")), run_id="run-tri")
    r.charge("a")
    r.charge("b")
    r.close({"algorithm": "manual"})
    run_unit(ledger, unit_plan())
    assert [rec["type"] for rec in read_records(path)] == [
        "header", "reserve", "charge", "charge", "close", "reserve", "charge", "close",
    ]
    return path


def assert_detected(path: Path) -> str:
    ok, msg, n = verify(path)
    assert ok is False, msg
    assert n == 0
    with pytest.raises(JournalError):
        Ledger.open(path)
    return msg


def test_untouched_journal_verifies(tmp_path):
    path = build_tamper_journal(tmp_path)
    ok, msg, n = verify(path)
    assert ok, msg
    assert n == 8
    assert "hash chain intact" in msg
    recs = read_records(path)
    assert recs[0]["prev"] == "0" * 64
    for before, rec in itertools.pairwise(recs):
        assert rec["prev"] == before["hash"]
    assert Ledger.open(path).spent == cost_tuple(3 * UNIT)


def test_edit_of_a_charged_noise_multiplier_is_detected(tmp_path):
    path = build_tamper_journal(tmp_path)
    raw = path.read_bytes()
    needle = b'"noise_multiplier":128.0'
    assert needle in raw
    # 128 -> 928: the node would look 7x cheaper than it was
    tampered = raw.replace(needle, b'"noise_multiplier":928.0', 1)
    assert len(tampered) == len(raw)
    path.write_bytes(tampered)
    msg = assert_detected(path)
    assert "modified" in msg
    with pytest.raises(JournalError):
        Ledger(Budget(8 * UNIT, 0.0), accountant="basic", journal=path)
    assert path.read_bytes() == tampered  # not "repaired" by overwriting


def test_edit_of_the_header_budget_is_detected(tmp_path):
    path = build_tamper_journal(tmp_path)
    raw = path.read_bytes()
    needle = b'"epsilon":0.0625'
    assert raw.split(b"\n")[0].count(needle) == 1
    path.write_bytes(raw.replace(needle, b'"epsilon":9.0625', 1))
    assert "modified" in assert_detected(path)


@pytest.mark.parametrize("i,j", [(0, 1), (1, 2), (2, 3), (3, 4), (5, 6), (6, 7), (2, 6)])
def test_reordered_lines_are_detected(tmp_path, i, j):
    path = build_tamper_journal(tmp_path)
    lines = path.read_bytes().split(b"\n")[:-1]
    lines[i], lines[j] = lines[j], lines[i]
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert_detected(path)


@pytest.mark.parametrize("i", range(7))
def test_deleted_line_before_the_last_is_detected(tmp_path, i):
    path = build_tamper_journal(tmp_path)
    lines = path.read_bytes().split(b"\n")[:-1]
    del lines[i]
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert_detected(path)


@pytest.mark.parametrize("i", range(8))
@pytest.mark.parametrize("where", ["after_itself", "at_end"])
def test_duplicated_line_is_detected(tmp_path, i, where):
    path = build_tamper_journal(tmp_path)
    lines = path.read_bytes().split(b"\n")[:-1]
    if where == "after_itself":
        lines.insert(i + 1, lines[i])
    else:
        lines.append(lines[i])
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert_detected(path)


def test_partial_last_line_is_detected(tmp_path):
    path = build_tamper_journal(tmp_path)
    raw = path.read_bytes()
    path.write_bytes(raw[:-1])  # only the final newline missing
    assert "incomplete" in assert_detected(path)
    path.write_bytes(raw[:-40])
    assert_detected(path)
    # a crash in the middle of the first append: half a header
    path.write_bytes(raw[:50])
    assert_detected(path)


def rewrite(path: Path, data: bytes) -> None:
    """``path.write_bytes(data)`` without truncating at open: ext4 writes a file that ``open(..., "wb")`` truncated back
    to disk when it is closed (``auto_da_alloc``), ~2 ms a write, and the tamper loops below write it thousands of times.
    The same bytes in the same file (inode) either way."""
    with open(path, "r+b" if path.exists() else "wb") as fh:
        fh.write(data)
        fh.truncate()


def copy_head(src: Path, dst: Path) -> None:
    """Give ``dst`` the sealed head of ``src`` (a journal copied with its sidecar)."""
    head_path(dst).write_bytes(head_path(src).read_bytes())


def test_every_truncation_is_detected_even_at_a_record_boundary(tmp_path):
    """Cutting inside a record is detected by the chain; cutting exactly at a record boundary (the
    last runs deleted, issue 10) by the sealed head, which still names the removed last record."""
    path = build_tamper_journal(tmp_path)
    raw = path.read_bytes()
    cut_path = tmp_path / "cut.jsonl"
    copy_head(path, cut_path)
    for cut in range(0, len(raw)):
        rewrite(cut_path, raw[:cut])
        msg = assert_detected(cut_path)
        if cut and raw[cut - 1:cut] == b"\n":
            assert "removed from its end" in msg, (cut, msg)
    cut_path.write_bytes(raw)
    assert verify(cut_path)[0]


def test_deleting_the_last_run_is_detected_and_spent_never_drops(tmp_path):
    """The issue-10 scenario: delete the records of the last run; a fresh open and verify refuse,
    so ``spent`` is never read lower than it was."""
    path = build_tamper_journal(tmp_path)
    spent = Ledger.open(path).spent
    lines = path.read_bytes().split(b"\n")[:-1]
    path.write_bytes(b"\n".join(lines[:5]) + b"\n")  # the last Run's reserve, charge, close removed
    assert "removed from its end" in assert_detected(path)
    path.write_bytes(b"\n".join(lines) + b"\n")  # put back: intact again
    assert verify(path)[0] and Ledger.open(path).spent == spent


def test_a_deleted_head_is_detected(tmp_path):
    path = build_tamper_journal(tmp_path)
    head_path(path).unlink()
    assert "head" in assert_detected(path)


def test_head_one_record_behind_is_a_crash_and_is_accepted(tmp_path):
    """A crash between the append and the head update leaves the head one record behind: accepted,
    and the next append seals again. Two records behind is not a crash: refused."""
    path = build_tamper_journal(tmp_path)
    records = read_records(path)
    spent = Ledger.open(path).spent

    def seal(count):
        head_path(path).write_text(head_line(count, records[count - 1]["hash"]) + "\n")

    seal(len(records) - 1)
    ledger = Ledger.open(path)
    assert ledger.spent == spent
    run_unit(ledger, unit_plan())
    assert Journal.open(path)._read_head()["count"] == len(records) + 3
    records = read_records(path)
    seal(len(records) - 2)
    assert "after its sealed head" in assert_detected(path)


def test_a_torn_head_slot_is_a_crash_and_is_accepted(tmp_path):
    """The head has two slots written alternately: a torn write of the newest leaves the other,
    one record behind."""
    from privsdr.accounting.journal import HEAD_SLOT

    path = build_tamper_journal(tmp_path)
    n = len(read_records(path))
    raw = bytearray(head_path(path).read_bytes())
    newest = (n % 2) * HEAD_SLOT
    raw[newest + 40:newest + 90] = b"x" * 50
    head_path(path).write_bytes(bytes(raw))
    assert verify(path)[0] and Ledger.open(path).spent == cost_tuple(3 * UNIT)
    raw[(1 - n % 2) * HEAD_SLOT + 40] ^= 1  # both slots torn: refused
    head_path(path).write_bytes(bytes(raw))
    assert "head" in assert_detected(path)


def test_emptied_to_its_header_without_a_head_is_refused(tmp_path):
    """Deleting every run *and* the head must not pass as a fresh journal (spent would read 0):
    a new journal's head is sealed before its header is written, so a header never lacks one."""
    path = build_tamper_journal(tmp_path)
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(lines[0] + b"\n")
    head_path(path).unlink()
    assert "missing" in assert_detected(path)


def test_an_emptied_journal_is_not_recreated(tmp_path):
    """Truncating the journal to nothing (or deleting it) while its head remains must not let
    Ledger(..., journal=PATH) create a fresh budget over it."""
    path = build_tamper_journal(tmp_path)
    path.write_bytes(b"")
    with pytest.raises(JournalError, match="emptied"):
        Ledger(Budget(8 * UNIT, 0.0), accountant="basic", journal=path)
    path.unlink()
    with pytest.raises(JournalError, match="emptied"):
        Ledger.create(path, Budget(8 * UNIT, 0.0), "basic")
    assert not path.exists() or path.read_bytes() == b""


def test_keyed_journal_detects_a_consistent_rewrite(tmp_path, monkeypatch):
    """Without the key the hashes of a keyed journal cannot be recomputed: a whole-file rewrite
    that recomputes every sha256 (and the head) consistently is detected; the key is never stored."""
    from privsdr.accounting.journal import record_hash

    key = "correct horse battery staple"
    path = tmp_path / "keyed.jsonl"
    ledger = Ledger(Budget(8 * UNIT, 0.0), accountant="basic", journal=path, journal_key=key)
    run_unit(ledger, unit_plan())
    run_unit(ledger, unit_plan())
    assert key.encode() not in path.read_bytes() and key.encode() not in head_path(path).read_bytes()
    assert verify(path, key=key)[0] and "HMAC" in verify(path, key=key)[1]
    with pytest.raises(JournalError, match="keyed"):
        Ledger.open(path)  # no key given, none in the environment
    monkeypatch.setenv("PRIVSDR_JOURNAL_KEY", key)
    assert Ledger.open(path).spent == cost_tuple(2 * UNIT)  # the key from the environment
    with pytest.raises(JournalError, match="another key"):
        Ledger.open(path, key="wrong key")
    # an attacker without the key drops the last run and rewrites the chain and the head as sha256
    records = read_records(path)[:-3]
    prev = "0" * 64
    for r in records:
        r.pop("mac", None), r.pop("key_id", None)
        r["prev"] = prev
        r["hash"] = prev = record_hash(r)
    path.write_bytes(b"".join(json.dumps(r, sort_keys=True, separators=(",", ":")).encode() + b"\n" for r in records))
    head_path(path).write_text(head_line(len(records), prev) + "\n")
    monkeypatch.delenv("PRIVSDR_JOURNAL_KEY")
    assert verify(path)[0]  # without the key nothing can tell ...
    assert not verify(path, key=key)[0]  # ... with it, the rewrite is refused
    monkeypatch.setenv("PRIVSDR_JOURNAL_KEY", key)
    with pytest.raises(JournalError, match="not keyed"):
        Ledger.open(path)


def test_keyed_journal_rejects_a_rewrite_that_keeps_the_key_fields(tmp_path):
    """The attacker keeps the header's mac/key_id fields and recomputes every hash as plain sha256:
    with the key the first record already fails."""
    from privsdr.accounting.journal import record_hash

    key = "k" * 20
    path = tmp_path / "keyed.jsonl"
    ledger = Ledger(Budget(8 * UNIT, 0.0), accountant="basic", journal=path, journal_key=key)
    run_unit(ledger, unit_plan())
    records = read_records(path)
    prev = "0" * 64
    for r in records:
        r["prev"] = prev
        r["hash"] = prev = record_hash(r)
    path.write_bytes(b"".join(json.dumps(r, sort_keys=True, separators=(",", ":")).encode() + b"\n" for r in records))
    ok, msg, _ = verify(path, key=key)
    assert not ok and "record 1 was modified" in msg


def test_keyed_journal_rejects_a_forged_head(tmp_path):
    key = b"k" * 32
    path = tmp_path / "keyed.jsonl"
    ledger = Ledger(Budget(8 * UNIT, 0.0), accountant="basic", journal=path, journal_key=key)
    run_unit(ledger, unit_plan())
    records = read_records(path)
    lines = path.read_bytes().split(b"\n")[:-1]
    path.write_bytes(b"\n".join(lines[:1]) + b"\n")
    head_path(path).write_text(head_line(1, records[0]["hash"]) + "\n")  # sealed without the key
    assert not verify(path, key=key)[0]


def test_key_from_a_file(tmp_path, monkeypatch):
    keyfile = tmp_path / "journal.key"
    keyfile.write_bytes(os.urandom(32).hex().encode() + b"\n")
    monkeypatch.setenv("PRIVSDR_JOURNAL_KEY_FILE", str(keyfile))
    path = tmp_path / "k.jsonl"
    Ledger.create(path, Budget(8 * UNIT, 0.0), "basic")
    assert read_records(path)[0]["mac"] == "hmac-sha256"
    assert Ledger.open(path).spent == cost_tuple(0.0)
    monkeypatch.setenv("PRIVSDR_JOURNAL_KEY", "x")
    with pytest.raises(JournalError, match="not both"):
        Ledger.open(path)


def test_repair_removes_a_torn_last_line_and_never_lowers_spent(tmp_path):
    """A crash mid-append leaves a torn line: the journal is refused until ``repair`` removes it.
    The torn record was never acknowledged, so spent after repair equals spent before the crash."""
    path = build_tamper_journal(tmp_path)
    spent = Ledger.open(path).spent
    raw = path.read_bytes()
    torn = b'{"hash":"ab12","label":"c","prev":"'
    path.write_bytes(raw + torn)
    assert "incomplete" in assert_detected(path)
    message = repair(path)
    assert "removed a torn last line" in message
    assert path.read_bytes() == raw
    assert [p.read_bytes() for p in tmp_path.glob("orig.jsonl.torn-*")] == [torn]
    assert verify(path)[0]
    ledger = Ledger.open(path)
    assert ledger.spent == spent
    run_unit(ledger, unit_plan())  # the repaired journal takes new charges
    assert ledger.spent == cost_tuple(spent.epsilon + UNIT)
    assert "nothing to repair" in repair(path)


def test_repair_refuses_tampering(tmp_path):
    path = build_tamper_journal(tmp_path)
    raw = path.read_bytes()
    lines = raw.split(b"\n")[:-1]
    # a missing tail plus a torn fragment: the head says more records than are complete
    path.write_bytes(b"\n".join(lines[:-2]) + b"\n" + lines[-2][:10])
    with pytest.raises(JournalError, match="sealed"):
        repair(path)
    # an edited record before a torn line
    path.write_bytes(raw.replace(b'"label":"a"', b'"label":"z"', 1) + b'{"x":')
    with pytest.raises(JournalError, match="modified"):
        repair(path)
    # a torn header: nothing to keep
    path.write_bytes(raw[:20])
    with pytest.raises(JournalError, match="header"):
        repair(path)


def test_live_ledger_detects_removal_of_its_last_records(tmp_path):
    path = build_tamper_journal(tmp_path)
    live = Ledger.open(path)
    assert live.spent == cost_tuple(3 * UNIT)
    lines = path.read_bytes().split(b"\n")[:-1]
    path.write_bytes(b"\n".join(lines[:-2]) + b"\n")  # roll back the last charge and close
    with pytest.raises(JournalError, match="shrank"):
        _ = live.spent
    with pytest.raises(JournalError):
        live.reserve(unit_plan())


def test_live_ledger_detects_a_forged_append(tmp_path):
    path = build_tamper_journal(tmp_path)
    live = Ledger.open(path)
    last = read_records(path)[-1]
    forged = {"type": "close", "run_id": "run-tri", "time": "x", "summary": {}, "prev": last["hash"], "hash": "0" * 64}
    with open(path, "ab") as fh:
        fh.write(json.dumps(forged, sort_keys=True, separators=(",", ":")).encode() + b"\n")
    with pytest.raises(JournalError, match="modified"):
        _ = live.spent
    assert_detected(path)


def parse_any_newline(data: bytes):
    """The records of ``data`` read leniently (any of \\n, \\r, \\r\\n ends a line), or None."""
    try:
        return [json.loads(line) for line in data.splitlines()]
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return None


def check_byte_change(path: Path, data: bytes, original_records, baseline) -> None:
    """A changed byte must be detected unless it leaves every record's content identical."""
    rewrite(path, data)
    ok, msg, n = verify(path)
    if parse_any_newline(data) == original_records:
        # e.g. a line break "\n" -> "\r" between two records: no record changed
        if ok:
            assert state(Ledger.open(path)) == baseline
        return
    assert ok is False, f"undetected change: {msg}"
    with pytest.raises(JournalError):
        Ledger.open(path)


def test_every_single_bit_flip_of_bit0_is_detected(tmp_path):
    """Exhaustive: flip the lowest bit of every byte of the journal, one at a time."""
    src = build_tamper_journal(tmp_path)
    raw = src.read_bytes()
    original = read_records(src)
    baseline = state(Ledger.open(src))
    target = tmp_path / "flipped.jsonl"
    copy_head(src, target)
    for pos in range(len(raw)):
        data = bytearray(raw)
        data[pos] ^= 0x01
        check_byte_change(target, bytes(data), original, baseline)


def test_hypothesis_any_ascii_byte_replacement_is_detected(tmp_path):
    src = build_tamper_journal(tmp_path)
    raw = src.read_bytes()
    assert raw.isascii()
    original = read_records(src)
    baseline = state(Ledger.open(src))
    target = tmp_path / "flipped.jsonl"
    copy_head(src, target)

    @settings(max_examples=200, derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(pos=st.integers(0, len(raw) - 1), value=st.integers(0, 126))
    def check(pos, value):
        new = value if value < raw[pos] else value + 1  # any ASCII byte other than the original
        data = bytearray(raw)
        data[pos] = new
        check_byte_change(target, bytes(data), original, baseline)

    check()


def test_hypothesis_any_byte_flip_is_detected(tmp_path):
    """Any bit pattern XOR-ed into any byte (including the high bit: non-UTF-8 bytes)."""
    src = build_tamper_journal(tmp_path)
    raw = src.read_bytes()
    original = read_records(src)
    baseline = state(Ledger.open(src))
    target = tmp_path / "flipped.jsonl"
    copy_head(src, target)

    @settings(max_examples=200, derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(pos=st.integers(0, len(raw) - 1), mask=st.integers(1, 255))
    def check(pos, mask):
        data = bytearray(raw)
        data[pos] ^= mask
        check_byte_change(target, bytes(data), original, baseline)

    check()


def test_non_utf8_byte_is_reported_as_tampering(tmp_path):
    """Minimal repro: one byte of a record replaced by 0xFF. verify() must return ok=False (it is
    the ``privsdr ledger verify`` entry point) and opening must raise JournalError."""
    path = build_tamper_journal(tmp_path)
    raw = bytearray(path.read_bytes())
    pos = raw.index(b'"label":"a"') + len(b'"label":"')
    raw[pos] = 0xFF
    path.write_bytes(bytes(raw))
    ok, msg, n = verify(path)  # currently raises UnicodeDecodeError
    assert ok is False
    with pytest.raises(JournalError):
        Ledger.open(path)


def test_line_break_variants_leave_the_records_intact(tmp_path):
    """A record separator changed from \\n to \\r is accepted: no record content changes, the
    ledger state is identical. (Pinned so that a change of this behaviour is noticed.)"""
    path = build_tamper_journal(tmp_path)
    raw = path.read_bytes()
    baseline = state(Ledger.open(path))
    first = raw.index(b"\n")
    data = raw[:first] + b"\r" + raw[first + 1:]
    path.write_bytes(data)
    ok, msg, n = verify(path)
    if ok:
        assert n == 8
        assert state(Ledger.open(path)) == baseline
    # the final separator must still be a "\n"
    path.write_bytes(raw[:-1] + b"\r")
    assert_detected(path)


# ---------------------------------------------------------------------------------------------
# 3. Several processes share one budget
# ---------------------------------------------------------------------------------------------
#: the four-process test: 4 x 20 attempts race for 40 unit fits (half succeed, the rest are refused)
CONTEND_FITS, CONTEND_ATTEMPTS = 40, 20
CONTEND_BUDGET = Budget(CONTEND_FITS * UNIT, 0.0)


def _contend_worker(path: str, attempts: int, how: str, start, queue) -> None:
    try:
        if how == "open":
            ledger = Ledger.open(path)
        else:
            ledger = Ledger(CONTEND_BUDGET, accountant="basic", journal=path)
        cp = unit_plan()
        assert start.wait(CHILD_TIMEOUT)
        ok = refused = 0
        for i in range(attempts):
            try:
                if i % 2:
                    run_unit(ledger, cp, seed=i)
                else:
                    reserve_unit(ledger, cp)
                ok += 1
            except BudgetExceededError:
                refused += 1
        queue.put(("done", os.getpid(), ok, refused))
    except BaseException:  # report everything to the parent
        queue.put(("error", os.getpid(), traceback.format_exc(), None))


def test_four_processes_share_one_budget_exactly(tmp_path):
    path = tmp_path / "shared.jsonl"
    Ledger.create(path, CONTEND_BUDGET, "basic")
    start = FORK.Event()
    queue = FORK.Queue()
    hows = ["open", "ctor", "open", "ctor"]
    procs = [FORK.Process(target=_contend_worker, args=(str(path), CONTEND_ATTEMPTS, how, start, queue)) for how in hows]
    for p in procs:
        p.start()
    start.set()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(CHILD_TIMEOUT)
        assert p.exitcode == 0
    errors = [r for r in results if r[0] != "done"]
    assert not errors, errors[0][2]

    assert sum(r[2] for r in results) == CONTEND_FITS
    assert sum(r[3] for r in results) == 4 * CONTEND_ATTEMPTS - CONTEND_FITS
    assert count_type(path, "charge") == CONTEND_FITS
    assert count_type(path, "reserve") == CONTEND_FITS
    assert count_type(path, "close") == CONTEND_FITS
    ledger = Ledger.open(path)
    assert len(ledger.charges) == CONTEND_FITS
    assert ledger.spent == cost_tuple(CONTEND_FITS * UNIT)
    assert ledger.remaining == cost_tuple(0.0)
    assert ledger.reserved == {}
    assert all(run.closed and run.charged == ["x"] for run in ledger.runs)
    # every journaled run belongs to the worker that reported it
    by_pid = {r[1]: r[2] for r in results}
    for pid, ok in by_pid.items():
        assert sum(1 for run in ledger.runs if run.pid == pid) == ok
    ok, msg, n = verify(path)
    assert ok, msg
    assert n == 1 + 3 * CONTEND_FITS


def _create_worker(path: str, queue) -> None:
    try:
        ledger = Ledger(BUDGET_120, accountant="basic", journal=path)
        reserve_unit(ledger, unit_plan())
        queue.put(("ok", os.getpid(), None))
    except BaseException as exc:
        queue.put(("error", os.getpid(), f"{type(exc).__name__}: {exc}"))


def _blocked_flock_waiters(lock_path: Path) -> int:
    ino = os.stat(lock_path).st_ino
    try:
        text = Path("/proc/locks").read_text()
    except OSError:
        return -1
    return sum(1 for line in text.splitlines() if "->" in line and f":{ino} " in line)


def test_processes_starting_together_on_a_missing_journal_all_get_the_ledger(tmp_path):
    """``Ledger(budget, journal=PATH)`` creates the journal if missing or reopens it. Two
    processes doing that at the same moment must both end up on the shared ledger."""
    import fcntl

    path = tmp_path / "fresh.jsonl"
    lock_path = Path(str(path) + ".lock")
    fd = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o644)
    queue = FORK.Queue()
    procs = []
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # hold the journal lock while both processes start
        procs = [FORK.Process(target=_create_worker, args=(str(path), queue)) for _ in range(2)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            waiting = _blocked_flock_waiters(lock_path)
            if waiting == -1:
                time.sleep(1.0)  # no /proc/locks: give both processes ample time to block
                break
            if waiting >= 2:
                break
            time.sleep(0.01)
        assert not path.exists()
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    results = [queue.get(timeout=CHILD_TIMEOUT) for _ in procs]
    for p in procs:
        p.join(CHILD_TIMEOUT)
    assert [r[0] for r in results] == ["ok", "ok"], results
    ledger = Ledger.open(path)
    assert ledger.spent == cost_tuple(2 * UNIT)
    assert verify(path)[0]


# ---------------------------------------------------------------------------------------------
# 4. Threads
# ---------------------------------------------------------------------------------------------
def _thread_contention(ledgers: list[Ledger], n_threads: int, attempts: int):
    cp = unit_plan()
    barrier = threading.Barrier(n_threads)
    counts = [[0, 0] for _ in range(n_threads)]
    errors: list[str] = []

    def work(t: int) -> None:
        ledger = ledgers[t % len(ledgers)]
        try:
            barrier.wait(CHILD_TIMEOUT)
            for i in range(attempts):
                try:
                    if (i + t) % 2:
                        run_unit(ledger, cp, seed=i)
                    else:
                        reserve_unit(ledger, cp)
                    counts[t][0] += 1
                except BudgetExceededError:
                    counts[t][1] += 1
        except BaseException:
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
        assert not th.is_alive()
    assert not errors, errors[0]
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def check_full_journal(path: Path, ledgers) -> None:
    assert count_type(path, "charge") == N_FIT
    assert count_type(path, "reserve") == N_FIT
    assert count_type(path, "close") == N_FIT
    for ledger in [*ledgers, Ledger.open(path)]:
        assert len(ledger.charges) == N_FIT
        assert ledger.spent == cost_tuple(N_FIT * UNIT)
        assert ledger.remaining == cost_tuple(0.0)
        assert ledger.reserved == {}
    ok, msg, n = verify(path)
    assert ok, msg
    assert n == 1 + 3 * N_FIT


def test_eight_threads_share_one_persistent_ledger(tmp_path):
    path = tmp_path / "threads.jsonl"
    ledger = Ledger(BUDGET_120, accountant="basic", journal=path)
    ok, refused = _thread_contention([ledger], 8, 20)
    assert ok == N_FIT
    assert refused == 8 * 20 - N_FIT
    check_full_journal(path, [ledger])


def test_threads_on_two_ledger_objects_opened_on_one_path(tmp_path):
    path = tmp_path / "threads2.jsonl"
    Ledger.create(path, BUDGET_120, "basic")
    ledgers = [Ledger.open(path), Ledger.open(path)]
    ok, refused = _thread_contention(ledgers, 8, 20)
    assert ok == N_FIT
    assert refused == 8 * 20 - N_FIT
    check_full_journal(path, ledgers)


def test_reservation_on_one_object_is_seen_by_the_other(tmp_path):
    path = tmp_path / "two.jsonl"
    Ledger.create(path, Budget(3 * UNIT, 0.0), "basic")
    first, second = Ledger.open(path), Ledger.open(path)
    r = first.reserve(multi_plan())
    with pytest.raises(BudgetExceededError):
        second.reserve(unit_plan())
    assert list(second.reserved) == [r.run_id]
    r.charge("a")
    r.close()  # a was charged, so b and c are charged at close: the whole plan
    assert second.spent == cost_tuple(3 * UNIT)
    assert second.reserved == {}
    with pytest.raises(BudgetExceededError):
        first.reserve(unit_plan())


# ---------------------------------------------------------------------------------------------
# 5. Crashes: a SIGKILLed process leaves its charges on record and frees only what it never charged
# ---------------------------------------------------------------------------------------------
def _charge_two_then_hang(path: str, conn) -> None:
    try:
        ledger = Ledger.open(path)
        r = ledger.reserve(multi_plan(), run_id="crashed-run")
        r.charge("a")
        r.charge("b")
        conn.send("charged")
    except BaseException:
        conn.send(traceback.format_exc())
        return
    time.sleep(120)  # killed by the parent long before this ends


def test_sigkill_after_two_charges(tmp_path):
    path = tmp_path / "crash.jsonl"
    Ledger.create(path, Budget(3 * UNIT, 0.0), "basic")
    parent_conn, child_conn = FORK.Pipe()
    proc = FORK.Process(target=_charge_two_then_hang, args=(str(path), child_conn))
    proc.start()
    try:
        wait_for(parent_conn, "charged", proc)
        # while the child lives, its third node stays reserved
        observer = Ledger.open(path)
        assert observer.spent == cost_tuple(2 * UNIT)
        assert {k: [c.label for c in v] for k, v in observer.reserved.items()} == {"crashed-run": ["c"]}
        with pytest.raises(BudgetExceededError):
            observer.reserve(unit_plan())
    finally:
        kill_and_reap(proc)

    # the same object re-evaluates: the process died after charging, so its whole plan counts ("c" too: it
    # could have stopped because of what "a" and "b" released)
    assert observer.reserved == {}
    ledger = Ledger.open(path)
    assert sorted(c.label for c in ledger.charges) == ["a", "b", "c"]
    assert ledger.spent == cost_tuple(3 * UNIT)
    assert ledger.remaining == cost_tuple(0.0)
    assert ledger.reserved == {}
    [run] = ledger.runs
    assert run.run_id == "crashed-run"
    assert run.pid == proc.pid
    assert run.charged == ["a", "b"]
    assert run.closed is False
    assert [r["type"] for r in read_records(path)] == ["header", "reserve", "charge", "charge"]
    ok, msg, n = verify(path)
    assert ok, msg
    assert n == 4

    # nothing was freed: no further plan fits
    with pytest.raises(BudgetExceededError):
        observer.reserve(unit_plan())
    assert verify(path)[0]


def _charge_then_hang_before_noise(path: str, conn) -> None:
    try:
        from privsdr.mechanisms import get_mechanism

        def hang_instead_of_sampling(self, *args, **kwargs):
            conn.send("charged-no-noise")
            time.sleep(120)
            raise AssertionError("not killed")

        type(get_mechanism("laplace")).sample = hang_instead_of_sampling  # only in this child
        ledger = Ledger.open(path)
        with Run(unit_plan(), ledger, random_state=0) as run:
            run.release("x", 0.0)
    except BaseException:
        conn.send(traceback.format_exc())


def test_sigkill_between_charge_and_noise_still_counts(tmp_path):
    """Fail closed: the child dies after the charge record is fsync'd and before any noise is
    drawn; the charge still counts."""
    path = tmp_path / "failclosed.jsonl"
    Ledger.create(path, Budget(2 * UNIT, 0.0), "basic")
    parent_conn, child_conn = FORK.Pipe()
    proc = FORK.Process(target=_charge_then_hang_before_noise, args=(str(path), child_conn))
    proc.start()
    try:
        wait_for(parent_conn, "charged-no-noise", proc)
    finally:
        kill_and_reap(proc)

    assert [r["type"] for r in read_records(path)] == ["header", "reserve", "charge"]
    ledger = Ledger.open(path)
    assert [c.label for c in ledger.charges] == ["x"]
    assert ledger.spent == cost_tuple(UNIT)
    assert ledger.remaining == cost_tuple(UNIT)
    assert ledger.reserved == {}
    [run] = ledger.runs
    assert run.closed is False and run.charged == ["x"] and run.summary == {}
    with pytest.raises(BudgetExceededError):
        ledger.reserve(multi_plan(("a", "b")))
    reserve_unit(ledger, unit_plan())
    assert ledger.spent == cost_tuple(2 * UNIT)
    assert verify(path)[0]


def _reserve_then_hang(path: str, conn) -> None:
    try:
        ledger = Ledger.open(path)
        ledger.reserve(multi_plan(), run_id="never-charged")
        conn.send("reserved")
    except BaseException:
        conn.send(traceback.format_exc())
        return
    time.sleep(120)


def test_sigkill_before_any_charge_frees_the_whole_reservation(tmp_path):
    path = tmp_path / "reserved.jsonl"
    Ledger.create(path, Budget(3 * UNIT, 0.0), "basic")
    parent_conn, child_conn = FORK.Pipe()
    proc = FORK.Process(target=_reserve_then_hang, args=(str(path), child_conn))
    proc.start()
    try:
        wait_for(parent_conn, "reserved", proc)
        with pytest.raises(BudgetExceededError):
            Ledger.open(path).reserve(unit_plan())
    finally:
        kill_and_reap(proc)
    ledger = Ledger.open(path)
    assert ledger.spent == cost_tuple(0.0)
    assert ledger.charges == ()
    assert ledger.reserved == {}
    r = ledger.reserve(multi_plan(("p", "q", "r"), name="again"))
    for label in ("p", "q", "r"):
        r.charge(label)
    r.close()
    assert ledger.spent == cost_tuple(3 * UNIT)
    assert verify(path)[0]


# ---------------------------------------------------------------------------------------------
# 6. Run summaries in close records and in ledger.summary()
# ---------------------------------------------------------------------------------------------
def test_run_summaries_are_journaled(tmp_path):
    path = tmp_path / "summaries.jsonl"
    ledger = Ledger(Budget(8 * UNIT, 0.0), accountant="basic", journal=path)

    with Run(unit_plan(), ledger, random_state=0, algorithm="my-algorithm") as run1:
        run1.release("x", 0.0)
    with Run(multi_plan(("a", "b")), ledger, random_state=1) as run2:
        run2.release("a", 0.0)  # "b" never released: charged at exit (the run released something)
    with pytest.raises(RuntimeError, match="boom"):
        with Run(unit_plan("failing"), ledger, random_state=2) as run3:
            raise RuntimeError("boom")

    assert ledger.spent == cost_tuple(3 * UNIT)
    assert ledger.reserved == {}
    closes = [r for r in read_records(path) if r["type"] == "close"]
    assert len(closes) == 3
    at_close = [r for r in read_records(path) if r["type"] == "charge" and r.get("at_close")]
    assert [r["label"] for r in at_close] == ["b"]
    expected = [
        (run1, "my-algorithm", UNIT, False),
        (run2, "tri", 2 * UNIT, False),
        (run3, "failing", 0.0, True),
    ]
    for rec, (run, algorithm, eps, failed) in zip(closes, expected, strict=True):
        s = rec["summary"]
        assert rec["run_id"] == run.report.run_id
        assert s["algorithm"] == algorithm
        assert s["status"] == "certified"
        assert s["status_line"] == run.report.status_line
        assert s["status_line"].startswith("CERTIFIED")
        assert s["spent_by_run"] == {"epsilon": eps, "delta": 0.0}
        assert s["failed"] is failed
        assert s["finished"] == run.report.timestamps["finished"]

    runs = ledger.summary()["runs"]
    assert [r["run_id"] for r in runs] == [c["run_id"] for c in closes]
    assert [(r["algorithm"], r["nodes"], r["charged"], r["closed"]) for r in runs] == [
        ("my-algorithm", 1, 1, True), ("tri", 2, 2, True), ("failing", 1, 0, True),
    ]
    for r, c in zip(runs, closes, strict=True):
        for key in ("algorithm", "status", "status_line", "spent_by_run", "failed"):
            assert r[key] == c["summary"][key]

    records = ledger.runs
    assert [r.closed for r in records] == [True, True, True]
    assert [r.charged for r in records] == [["x"], ["a", "b"], []]
    assert records[0].summary["algorithm"] == "my-algorithm"

    reopened = Ledger.open(path)
    assert reopened.summary() == ledger.summary()
    s = reopened.summary()
    assert s["spent"] == {"epsilon": 3 * UNIT, "delta": 0.0}
    assert s["remaining"] == {"epsilon": 5 * UNIT, "delta": 0.0}
    assert s["accountant"] == {"name": "basic"}
    assert s["relation"] == "replace_one"
    assert s["journal"] == str(path)


def test_journal_object_direct(tmp_path):
    """The Journal layer on its own: append needs the lock, records chain, reopen syncs."""
    path = tmp_path / "raw.jsonl"
    j = Journal.create(path, {"budget": {"epsilon": 1.0, "delta": 0.0}})
    with pytest.raises(RuntimeError):
        j.append({"type": "charge"})
    with j.locked():
        j.append({"type": "note", "n": 1})
    other = Journal.open(path)
    assert [r["type"] for r in other.records] == ["header", "note"]
    with other.locked():
        other.append({"type": "note", "n": 2})
    with j.locked():
        assert [r.get("n") for r in j.records] == [None, 1, 2]
    assert j.last_hash == other.last_hash
    with pytest.raises(JournalError):
        Journal.create(path, {})
    assert verify(path)[0]
