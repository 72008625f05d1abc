"""Issue 10 item 7: every shell and Python block of README.md and docs/**/*.md runs, so the docs
cannot drift from the program again.

Rules (also the contract for whoever writes docs):

* A fenced block tagged ``bash``/``sh``/``shell`` runs line by line (a trailing ``\\`` continues a
  line) with ``bash``, or in this process when the line is one ``privsdr ...`` command (its ``$(...)``
  substitutions, if any, expanded by ``bash`` first). Each line must exit 0, unless its comment says ``→ exit N``.
  In a line that runs in ``bash`` (a pipe, a redirection, ``&``), ``privsdr`` is forked by the warm CLI server through
  a PATH shim (``tests/warm_path.py``): the same text, streams, ``$!`` and exit statuses, without an interpreter start
  and a scikit-learn import per command.
* A block tagged ``python`` runs with ``exec``; the blocks of one page share one namespace.
* Blocks of one page run in order, in one fresh folder that holds these public example files:
  ``rows.csv`` and ``new_rows.csv`` (columns x1..x4 and y), ``site1.csv``/``site2.csv`` (FSIR
  sites, x0..x5 and y) and ``bounds.json`` (per-column bounds of rows.csv).
* A block that cannot run here is marked on the line before its fence with
  ``<!-- docs-test: skip (the reason) -->``; the reason is required.
* Other blocks (``json``, ``text``) are shown, not run.
"""
from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from warm_path import WarmPath

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
FENCE = re.compile(r"^```(\w*)\s*$")
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*\((.+)\)\s*-->")
EXPECT = re.compile(r"→\s*exit\s+(\d+)")
SHELL, PYTHON = {"bash", "sh", "shell"}, {"python"}


def blocks(page: Path) -> list[tuple[int, str, str, str | None]]:
    """(line number, language, code, skip reason) of every fenced block of a page."""
    out, lines = [], page.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m and m.group(1):
            start, language = i, m.group(1)
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            previous = lines[start - 1] if start else ""
            skip = SKIP.search(previous)
            out.append((start + 1, language, "\n".join(lines[start + 1 : j]), skip.group(1).strip() if skip else None))
            i = j + 1
        else:
            i += 1
    return out


@functools.cache
def example_files() -> dict[str, str]:
    """The public example files every page's folder starts with, made once per test process (the pages only read
    them or write files of their own beside them)."""
    rng = np.random.default_rng(2024)
    files = {}

    def table(name: str, X: np.ndarray, y: np.ndarray, prefix: str, start: int) -> None:
        names = [f"{prefix}{j + start}" for j in range(X.shape[1])]
        rows = [",".join([*names, "y"])] + [",".join(f"{v:.5f}" for v in (*r, t)) for r, t in zip(X, y, strict=True)]
        files[name] = "\n".join(rows) + "\n"

    X = np.clip(rng.standard_normal((3000, 4)), -3, 3)
    y = X[:, 0] - X[:, 1] + 0.5 * rng.standard_normal(3000)
    table("rows.csv", X, y, "x", 1)
    table("new_rows.csv", X[:100] * 1.5, y[:100], "x", 1)
    files["bounds.json"] = '{"x1": 1, "x2": 1, "x3": [-1, 0.5], "x4": 1}'
    from privsdr.datasets import fsir_model

    B = None
    for k in (1, 2):
        Xs, ys, B = fsir_model("III", 1500, 6, seed=k, B=B)
        table(f"site{k}.csv", Xs, ys, "x", 0)
    return files


def fixtures(folder: Path) -> None:
    for name, text in example_files().items():
        (folder / name).write_text(text)


def commands(code: str) -> list[str]:
    out, current = [], ""
    for line in code.splitlines():
        current += line.rstrip("\\") + (" " if line.endswith("\\") else "")
        if line.endswith("\\"):
            continue
        if current.strip() and not current.strip().startswith("#"):
            out.append(current.strip())
        current = ""
    return out


PLAIN = re.compile(r"privsdr(\s+[^|;&<>$`()]+)?")
SUBSTITUTION = re.compile(r"\$\([^()`]*\)")


def in_process(plain: str) -> bool:
    """A line that is one ``privsdr`` command, its ``$(...)`` substitutions aside: run in this process."""
    return bool(PLAIN.fullmatch(plain)) or (plain.startswith("privsdr ") and bool(PLAIN.fullmatch(SUBSTITUTION.sub("x", plain))))


def privsdr_words(plain: str, folder: Path) -> list[str] | None:
    """The arguments of a line that is one ``privsdr`` command, as bash would pass them, or None for any other line.
    A line that needs the shell only for ``$(...)`` substitutions (no pipe, redirection or ``&`` outside them) has them
    expanded by bash here (quotes and word splitting as bash does), so that it too runs in this process."""
    if PLAIN.fullmatch(plain):
        return shlex.split(plain)[1:]
    if not in_process(plain):
        return None
    script = f'set -e -o pipefail; words=({plain[len("privsdr"):]}); printf "%s\\0" "${{words[@]}}"'
    done = subprocess.run(["bash", "-c", script], cwd=folder, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"`{plain}`: its substitutions failed\n{done.stderr}"
    return done.stdout.split("\0")[:-1]


def run_shell(command: str, folder: Path, warm: WarmPath | None = None) -> tuple[int, str]:
    expected_text = command.split("#", 1)[1] if "#" in command else ""
    plain = command.split("#", 1)[0].strip()
    words = privsdr_words(plain, folder)
    if words is not None:
        from privsdr.cli import main

        out, err = io.StringIO(), io.StringIO()
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(words)
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else 2
        finally:
            os.chdir(cwd)
        return code, expected_text + "\n" + err.getvalue() + out.getvalue()[-2000:]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env = warm.env(env) if warm is not None else env
    done = subprocess.run(["bash", "-o", "pipefail", "-c", plain], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, expected_text + "\n" + done.stderr + done.stdout[-2000:]


def starts_privsdr_through_bash(found: list[tuple[int, str, str, str | None]]) -> bool:
    """Whether a shell line of the page starts ``privsdr`` through bash (in the background, piped, redirected)."""
    lines = [command.split("#", 1)[0].strip() for _, language, code, skip in found if skip is None and language in SHELL
             for command in commands(code)]
    return any(re.search(r"\bprivsdr\b", plain) and not in_process(plain) for plain in lines)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_block_of_the_page_runs(page, tmp_path, request):
    """Each ``privsdr`` that a line starts through bash runs through the warm CLI server (``tests/warm_path.py``):
    the line's text, streams, ``$!`` and exit statuses as pasted; only the interpreter start is shared."""
    found = blocks(page)
    fixtures(tmp_path)
    warm = WarmPath(request.getfixturevalue("warm_cli")) if starts_privsdr_through_bash(found) and WarmPath.usable() else None
    try:
        run_page(page, found, tmp_path, warm)
    finally:
        if warm is not None:
            warm.close()


def run_page(page: Path, found: list[tuple[int, str, str, str | None]], tmp_path: Path, warm: WarmPath | None) -> None:
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    for line, language, code, skip in found:
        if skip is not None:
            assert len(skip) > 10, f"{page.name}:{line}: a skip needs its reason"
            continue
        if language in SHELL:
            for command in commands(code):
                expected = EXPECT.search(command.split("#", 1)[1]) if "#" in command else None
                status, output = run_shell(command, tmp_path, warm)
                want = int(expected.group(1)) if expected else 0
                assert status == want, f"{page.name}:{line}: `{command}` exited {status}, expected {want}\n{output}"
                ran += 1
        elif language in PYTHON:
            cwd = os.getcwd()
            os.chdir(tmp_path)
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(code, f"{page.name}:{line}", "exec"), namespace)  # noqa: S102 - our own docs
            finally:
                os.chdir(cwd)
            ran += 1
    runnable = [b for b in found if b[1] in SHELL | PYTHON]
    assert ran or not runnable or all(b[3] for b in runnable)


def test_the_runner_sees_every_block_and_every_skip_has_a_reason():
    total = skipped = 0
    for page in PAGES:
        for line, language, _, skip in blocks(page):
            if language in SHELL | PYTHON:
                total += 1
                skipped += skip is not None
                assert skip is None or len(skip) > 10, (page, line)
    assert total >= 15 and skipped <= 3, (total, skipped)


def test_a_privsdr_started_through_bash_keeps_its_streams_status_and_signals(tmp_path, warm_cli):
    """The PATH shim of ``tests/warm_path.py`` must not hide a failure: a page's background command that fails makes
    its line fail as a fresh ``privsdr`` would (its exit status through ``wait``, its stderr where the line sent it)."""
    warm = WarmPath(warm_cli)
    try:
        status, output = run_shell("privsdr --version | tr a-z A-Z", tmp_path, warm)
        assert status == 0 and "PRIVSDR 0.1" in output, output
        status, _ = run_shell("privsdr nonsense 2> err.log & b=$!; wait $b", tmp_path, warm)
        assert status == 2 and "invalid choice: 'nonsense'" in (tmp_path / "err.log").read_text()
        status, _ = run_shell("privsdr ledger show missing.jsonl; echo $? > status.txt", tmp_path, warm)
        assert status == 0 and (tmp_path / "status.txt").read_text().strip() == "2"
        # SIGTERM to the shim ends the command itself (128 + 15, as for a fresh process), not close() below
        assert run_shell("privsdr secure keys k --parties alice bob", tmp_path, warm)[0] == 0
        (tmp_path / "ids.csv").write_text("id\nA\n")
        waiting = subprocess.Popen(["privsdr", "vertical", "link", "--parties", "alice=127.0.0.11:29411", "bob=127.0.0.12:29412",
                                    "--label", "alice", "--timeout", "60", "--name", "alice", "--data", "ids.csv",
                                    "--id-column", "id", "--out", "o.csv", "--certs", "k/alice"], cwd=tmp_path,
                                   env=warm.env(dict(os.environ)), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while not warm.running() and waiting.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)  # until the command is forked (the shim has its signal handlers by then)
            assert warm.running(), "the command was not forked"
            waiting.terminate()
            assert waiting.wait(timeout=30) == 143 and not warm.running()
        finally:
            if waiting.poll() is None:
                waiting.kill()
                waiting.wait()
    finally:
        warm.close()
