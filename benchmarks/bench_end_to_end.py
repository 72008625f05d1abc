"""Two CSVs with identifier columns to a filed report, across three "hosts" (issue 36, "Measure"): the documented
commands of docs/hosts.md, each step timed.

    python benchmarks/bench_end_to_end.py [--rows 100000] [--extra 0.1] [--workers 1] [--keep DIR]

alice (127.0.0.2: x1, x2, y) and bob (127.0.0.3: x3, x4) each hold a CSV with an identifier column: the ``--rows``
people they have in common plus a share ``--extra`` of people only they hold, each in its own shuffled row order
(bob's identifiers in lower case with spaces around them, linked with ``--casefold``). The helper is 127.0.0.4.
The steps, each a ``privsdr`` process as a party would start it on its own host (every channel mutual TLS):

1. ``privsdr secure keys`` (a CA and a key and certificate per party);
2. ``privsdr vertical link`` at alice and at bob (private set intersection; N = ``--rows``);
3. ``privsdr vertical config --secure`` with N from the linkage and one address per party;
4. ``privsdr vertical helper`` and ``privsdr vertical party --secure`` at alice and bob, to alice's filed report
   (``alice.html``) and every data party's journal.

Making the input CSVs (``privsdr demo --write-data`` and a split) is not timed. Printed: each step's wall time and
the CPU seconds of its processes (children's rusage), the machine's load average, the total against the goal of
2 minutes at N = 10^5. The two data parties and the helper share this machine's cores, as they would not on three hosts.
A measurement, not a test: it never fails on time; it stops on a failed step.
"""
from __future__ import annotations

import argparse
import csv
import os
import random
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PRIVSDR = str(Path(sys.executable).with_name("privsdr"))
ALICE, BOB, HELPER = "127.0.0.2", "127.0.0.3", "127.0.0.4"


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _step(name: str, commands: list[list[str]], folder: Path, timeout: float) -> tuple[float, float]:
    """Start every command at once (each in its own process group), wait for all; (wall s, CPU s) or SystemExit."""
    cpu, start = _children_cpu(), time.perf_counter()
    procs = []
    try:
        for i, command in enumerate(commands):
            log = open(folder / f"{name}-{i}.log", "w")  # noqa: SIM115 - closed with the process below
            procs.append((subprocess.Popen(command, cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True), log))
        deadline = time.monotonic() + timeout
        codes = [p.wait(timeout=max(deadline - time.monotonic(), 0.1)) for p, _ in procs]
    except subprocess.TimeoutExpired:
        codes = [-1]
    finally:
        for p, log in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            log.close()
    seconds, used = time.perf_counter() - start, _children_cpu() - cpu
    if any(codes):
        for i in range(len(commands)):
            print(f"--- {name} process {i} ({' '.join(commands[i][:3])} ...):\n" + (folder / f"{name}-{i}.log").read_text()[-2000:])
        raise SystemExit(f"step {name!r} failed (exit codes {codes})")
    return seconds, used


def _write_inputs(folder: Path, rows: int, extra: float) -> None:
    """alice_ids.csv (id, x1, x2, y) and bob_ids.csv (x3, id, x4): ``rows`` common people, ``extra`` more each."""
    only = int(rows * extra)
    total = rows + 2 * only
    subprocess.run([PRIVSDR, "demo", "--write-data", "rows.csv", "--n", str(total), "--p", "4"], cwd=folder, check=True,
                   stdout=subprocess.DEVNULL)
    with open(folder / "rows.csv", newline="") as f:
        data = list(csv.reader(f))[1:]
    rng = random.Random(0)
    alice = list(range(rows + only))                        # the common people and alice's own
    bob = list(range(rows)) + list(range(rows + only, total))  # the common people and bob's own
    rng.shuffle(alice)
    rng.shuffle(bob)
    with open(folder / "alice_ids.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "x1", "x2", "y"])
        w.writerows([f"P{i:07d}", data[i][0], data[i][1], data[i][4]] for i in alice)
    with open(folder / "bob_ids.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["x3", "id", "x4"])
        w.writerows([data[i][2], f" p{i:07d} ", data[i][3]] for i in bob)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="N: the people both parties hold (default 10^5)")
    parser.add_argument("--extra", type=float, default=0.1, help="share of further people only one party holds (default 0.1)")
    parser.add_argument("--workers", type=int, default=1, help="`vertical link --workers` of each party (default 1)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per step before it is stopped")
    parser.add_argument("--keep", default=None, help="run in this (new) folder and keep it, instead of a temporary one")
    args = parser.parse_args()
    folder = Path(args.keep or tempfile.mkdtemp(prefix="privsdr-e2e-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        _write_inputs(folder, args.rows, args.extra)
        link_ports = [_free_port(ALICE), _free_port(BOB)]
        mpc = [f"{HELPER}:{_free_port(HELPER)}", f"{ALICE}:{_free_port(ALICE)}", f"{BOB}:{_free_port(BOB)}"]
        link = [PRIVSDR, "vertical", "link", "--parties", f"alice={ALICE}:{link_ports[0]}", f"bob={BOB}:{link_ports[1]}",
                "--label", "alice", "--casefold", "--timeout", str(args.timeout), "--id-column", "id",
                "--workers", str(args.workers)]
        party = [PRIVSDR, "vertical", "party", "--secure", "--config", "shared.json"]
        steps: list[tuple[str, list[list[str]]]] = [
            ("keys", [[PRIVSDR, "secure", "keys", "keys", "--parties", "helper", "alice", "bob"]]),
            ("link", [link + ["--name", "bob", "--data", "bob_ids.csv", "--out", "bob.csv", "--certs", "keys/bob"],
                      link + ["--name", "alice", "--data", "alice_ids.csv", "--out", "alice.csv", "--certs", "keys/alice"]]),
        ]
        print(f"N = {args.rows} linked rows ({int(args.rows * (1 + args.extra))} identifiers per party), "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the start")
        print("| step | wall s | CPU s | load 1 min after |\n|---|---|---|---|")
        total = 0.0
        for i in range(4):
            if i == 2:  # N is read off the linkage's output, as docs/hosts.md does
                with open(folder / "alice.csv") as f:
                    n = sum(1 for _ in f) - 1
                assert n == args.rows, f"linked {n} rows, expected {args.rows}"
                steps += [
                    ("config", [[PRIVSDR, "vertical", "config", "shared.json", "--secure", "--party", "alice=2", "bob=2",
                                 "--rows", str(n), "--label", "alice", "--epsilon", "1", "--row-bound", "4",
                                 "--label-bound", "6", "--timeout", str(args.timeout), "--addresses", *mpc]]),
                    ("parties", [[PRIVSDR, "vertical", "helper", "--config", "shared.json", "--certs", "keys/helper"],
                                 party + ["--name", "bob", "--data", "bob.csv", "--certs", "keys/bob", "--journal", "bob.jsonl"],
                                 party + ["--name", "alice", "--data", "alice.csv", "--target", "y", "--certs", "keys/alice",
                                          "--journal", "alice.jsonl", "--report", "alice.html"]]),
                ]
            name, commands = steps[i]
            seconds, cpu = _step(name, commands, folder, args.timeout)
            total += seconds
            print(f"| {name} | {seconds:.1f} | {cpu:.1f} | {os.getloadavg()[0]:.1f} |", flush=True)
        assert (folder / "alice.html").stat().st_size > 0 and (folder / "alice.jsonl").stat().st_size > 0
        print(f"| total | {total:.1f} | | |")
        print(f"two CSVs to alice's filed report (alice.html, alice.jsonl) in {total:.1f} s (goal at N = 10^5: 120 s)")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
