"""Shared fixtures of the CLI tests: an in-process ``privsdr`` runner, tables, journals; the hypothesis profile."""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

# Under CI (CI=true) every property test draws the same examples on every run, so a landing never depends
# on which examples one run happened to draw; on a developer's machine they stay random and keep exploring
# (a random run found the grid rounding edge now pinned by @example in tests/test_secure_sampler.py).
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    settings.load_profile("ci")

# The processes the suite starts (xdist workers, CLI, party and docs subprocesses) keep compiled bytecode: with
# PYTHONDONTWRITEBYTECODE set (as on some machines of ours), each of them compiled every module it imported again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

from privsdr import Ledger
from privsdr.accounting.default import reset_tracking_ledger, set_default_ledger
from privsdr.cli import main


def pytest_configure(config):
    """As scikit-learn's own suite does: each xdist worker gets its share of the cores for BLAS (threadpoolctl ships
    with scikit-learn), so n workers on n cores do not each start n BLAS threads and fight over them."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        from threadpoolctl import threadpool_limits

        threadpool_limits(max((os.cpu_count() or 1) // int(workers), 1))


#: the suite's longest tests (2-9 s each on a 2-core machine, from a --durations=0 run; mypy's when its cache is
#: cold), started first:
#: at their place in the collection order (test_static.py and test_vertical*.py come last) a worker began one of them
#: when the other had nothing left, and the suite waited for it alone. Only the order changes; a stale entry moves nothing.
LONGEST_FIRST = (
    "tests/test_secure_fail_clean.py::test_the_documented_one_line_run_exits_non_zero_when_a_party_fails",
    "tests/test_secure_tls.py::test_an_impostor_is_refused_before_any_party_agrees_so_before_anything_is_charged",
    "tests/test_static.py::test_mypy_is_clean",
    "tests/test_docs.py::test_every_block_of_the_page_runs[docs/hosts.md]",
    "tests/test_secure_fail_clean.py::test_one_party_that_cannot_run_leaves_every_journal_as_it_was",
    "tests/test_pls_cli.py::test_attack_reproduction_and_canary_audit",
    "tests/test_dpsir.py::test_dpsir_audit_b1_releases_pass_and_dropped_p_factor_mutant_fails",
    "tests/test_sklearn.py::test_grid_search_on_worker_processes_charges_one_journal",
    "tests/test_pls_privacy.py::test_ssp_releases_pass_a_tight_audit_and_the_halved_noise_mutant_fails",
    "tests/test_pride_reproduce.py::test_figure_curves_show_the_confounding_gap_and_are_written",
    "tests/test_pls_cli.py::test_figure3_small_grid_writes_csv_markdown_png",
    "tests/test_docs.py::test_every_block_of_the_page_runs[docs/vertical.md]",
    "tests/test_pride_cli.py::test_two_party_processes_talk_through_a_mailbox_and_only_the_label_holder_estimates",
    "tests/test_audit.py::test_dp_mean_covariance_passes_end_to_end_audit",
    "tests/test_dpsir.py::test_dpsir_audit_directions_pass_and_noise_free_mutant_fails",
    "tests/test_secure_vertical_streaming.py::test_a_party_processs_peak_memory_does_not_grow_with_N",
    "tests/test_cli.py::test_html_report_renders_in_headless_chromium_with_the_chart",
    "tests/test_privacy_mutants.py::test_sparse_dpsir_step_audit_catches_a_sensitivity_with_1_over_n",
    "tests/test_preprocessing.py::test_the_dp_scaler_passes_its_end_to_end_audit_and_half_the_noise_fails",
    "tests/test_docs.py::test_every_block_of_the_page_runs[docs/algorithms/edpls.md]",
    "tests/test_pls_privacy.py::test_paper_mode_fails_the_canary_audit",
    "tests/test_docs.py::test_every_block_of_the_page_runs[docs/secure.md]",
    "tests/test_dpsir_moments.py::test_moments_release_passes_its_audit_and_a_halved_sensitivity_fails",
    "tests/test_scale.py::test_the_chunked_fit_passes_its_audit_and_a_halved_sensitivity_fails",
    "tests/test_mailbox_network.py::test_sigterm_stops_a_cli_party_which_tells_the_others_and_closes_its_journal_run",
    "tests/test_privacy_mutants.py::test_published_vgm_leaks_through_its_noise_shape[centred]",
    "tests/test_secure_forks.py::test_a_release_without_an_answer_in_time_is_never_answered_by_the_next_fork",
    "tests/test_journal.py::test_every_single_bit_flip_of_bit0_is_detected",
    "tests/test_pride_core.py::test_oracle_2_srht_is_unbiased_and_the_sketch_kernel_gains_sigma2_tau_subs",
    "tests/test_dpsir_moments.py::test_onepass_final_is_never_worse_than_its_initializer_on_a_fixed_seed_grid",
    "tests/test_dpsir.py::test_sparse_dpsir_audit_screening_membership",
)


def pytest_collection_modifyitems(session, config, items):
    """Longest tests first (``LONGEST_FIRST``), the rest in collection order: with ``--dist worksteal`` each worker
    starts on its half of this list and steals from the end of the other's, so the long ones run while there is
    still short work to balance the finish."""
    def rank(item) -> int:
        return next((i for i, prefix in enumerate(LONGEST_FIRST) if item.nodeid.startswith(prefix)), len(LONGEST_FIRST))

    items[:] = sorted(items, key=rank)  # stable: the collection order within each rank


@pytest.fixture(autouse=True, scope="session")
def fsync_checks_the_descriptor_only():
    """In the test processes ``os.fsync`` checks its descriptor (``os.fstat``: a closed or bad one still raises
    OSError) but does not wait for the disk. What an fsync adds (the bytes survive a power cut) cannot be seen by
    any test, and the journals' write-ahead records cost ~5 ms of disk wait each, thousands of times per suite.
    The order of writes, renames and locks is unchanged, and processes the tests start (parties, CLI
    subprocesses, the kill -9 tests of ``test_journal.py``) keep the real fsync."""
    real = os.fsync
    os.fsync = lambda fd: None if os.fstat(fd) else None
    yield
    os.fsync = real


@pytest.fixture(autouse=True)
def fresh_default_ledger():
    """Each test starts with no default ledger configured and an empty tracking ledger (``privsdr.default_ledger``),
    so a test never inherits another's charges and the tracking ledger of a worker stays small."""
    set_default_ledger(None)
    reset_tracking_ledger()
    yield
    set_default_ledger(None)
    reset_tracking_ledger()


def run_cli(*args, cwd=None) -> subprocess.CompletedProcess:
    """``privsdr ARGS`` run in this process, as ``subprocess.run(..., capture_output=True, text=True)`` would report
    it (returncode, stdout, stderr): the parser, every check, the fits and the files are the command's own; only
    the interpreter start (about 2 s with scikit-learn) is saved. Warnings are shown as a fresh process shows
    them. Tests about processes themselves (concurrency, closed pipes, party processes) keep real subprocesses."""
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("default")
            try:
                code = main([str(a) for a in args])
            except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess([sys.executable, "-m", "privsdr", *map(str, args)], code, out.getvalue(), err.getvalue())


class CliResult:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.code, self.out, self.err = code, out, err

    def __repr__(self) -> str:
        return f"CliResult(code={self.code}, err={self.err.strip()!r})"


@pytest.fixture
def cli(capsys):
    """``cli(*args)`` runs ``privsdr ARGS`` in this process and returns (code, stdout, stderr)."""

    def run(*args) -> CliResult:
        capsys.readouterr()
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse usage errors
            code = exc.code if isinstance(exc.code, int) else 2
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture(scope="session")
def warm_cli():
    """``warm_cli.start(args, cwd=, env=)``: a real ``privsdr ARGS`` process (own session, pipes, exit code) forked from a
    server that has imported scikit-learn and the CLI once (``tests/warm_cli.py``); the server ends with the session."""
    from warm_cli import WarmCli

    server = WarmCli()
    yield server
    server.close()


def write_table(path: Path, X: np.ndarray, y: np.ndarray, names=None, target: str = "y") -> Path:
    names = names or [f"x{j + 1}" for j in range(X.shape[1])]
    lines = [",".join([*names, target])] + [",".join(f"{v:.6f}" for v in (*row, t)) for row, t in zip(X, y, strict=True)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def sir_table(tmp_path):
    """600 rows of DP-SIR model M1 with p = 4 (|x_ij| <= 1), columns x1..x4 and y."""
    from privsdr.datasets import sir_model

    X, y, _ = sir_model("M1", 600, 4, seed=3)
    return write_table(tmp_path / "rows.csv", X, y)


@pytest.fixture
def journal(tmp_path):
    """A journal with room for a few fits (epsilon 20, delta 1e-4, basic accountant)."""
    path = tmp_path / "budget.jsonl"
    Ledger.create(path, (20.0, 1e-4), "basic")
    return path


def spent(path: Path):
    return Ledger.open(path).spent


def leftovers(folder: Path) -> list[str]:
    """Temp files an interrupted atomic write would leave behind."""
    return sorted(p.name for p in folder.rglob("*.tmp"))


def alive(pid: int) -> bool:
    """True while the process runs: it exists and is no zombie (one that has ended and waits to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone, or reaped between the open and the read (ESRCH)
        return False


def gone(pids) -> bool:
    """True when none of these processes exists any more (the tests that start party processes check it)."""
    import os

    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        return False
    return True
