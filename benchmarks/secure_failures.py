"""Issue 36 item 4, tried as a new user would: twelve ways one party of a secure vertical run can be unable to run.

For each case, the helper, bob and alice run as three ``privsdr vertical ... --secure`` processes (one shared
configuration, loopback ports, a journal each); one party gets the fault. The table says, per case, every party's
exit code, whether every journal is byte for byte what it was before the run (a missing journal stays missing), and
the last line each party printed. Every process this script starts is ended by its process group.

    python benchmarks/secure_failures.py               # every case (a few minutes: the timeout cases wait)
    python benchmarks/secure_failures.py --only nan     # cases whose name contains "nan"
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CLI = [sys.executable, "-m", "privsdr"]
PARTIES = ("helper", "bob", "alice")
ROWS = 200


def cli(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120)


def write_data(folder: Path, n: int = ROWS) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 4)) * 0.5
    y = X @ np.array([1.0, -1.0, 0.5, 0.2]) + 0.3 * rng.normal(size=n)
    np.savetxt(folder / "alice.csv", np.column_stack([X[:, :2], y]), delimiter=",", header="a1,a2,y", comments="")
    np.savetxt(folder / "bob.csv", X[:, 2:], delimiter=",", header="b1,b2", comments="")


def configure(folder: Path, name: str = "shared.json", epsilon: float = 1.0, timeout: float = 20.0) -> Path:
    done = cli("vertical", "config", name, "--secure", "--party", "alice=2", "bob=2", "--rows", ROWS, "--label", "alice",
               "--epsilon", epsilon, "--row-bound", 2, "--label-bound", 4, "--timeout", timeout, cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder / name


def commands(folder: Path, config: dict[str, str], extra: dict[str, list[str]]) -> dict[str, list[str]]:
    base = {"helper": ["vertical", "helper"],
            "bob": ["vertical", "party", "--secure", "--name", "bob", "--data", "bob.csv"],
            "alice": ["vertical", "party", "--secure", "--name", "alice", "--data", "alice.csv", "--target", "y"]}
    out = {}
    for name in PARTIES:
        args = [*base[name], "--config", config.get(name, "shared.json"), "--journal", f"{name}.jsonl"]
        out[name] = args + extra.get(name, [])
    return out


def fault(case: str, folder: Path) -> tuple[dict[str, str], dict[str, list[str]], object]:
    """Apply the case's fault; (configs by party, extra arguments by party, something to close afterwards)."""
    configs: dict[str, str] = {}
    extra: dict[str, list[str]] = {}
    held = None
    text = (folder / "bob.csv").read_text().splitlines()
    if case == "nan-in-csv":
        text[5] = "nan," + text[5].split(",")[1]
        (folder / "bob.csv").write_text("\n".join(text) + "\n")
    elif case == "text-in-csv":
        text[7] = "abc," + text[7].split(",")[1]
        (folder / "bob.csv").write_text("\n".join(text) + "\n")
    elif case == "missing-label-column":
        lines = (folder / "alice.csv").read_text().splitlines()
        (folder / "alice.csv").write_text("\n".join(",".join(r.split(",")[:2]) for r in lines) + "\n")
    elif case == "missing-column":
        (folder / "bob.csv").write_text("\n".join(r.split(",")[0] for r in text) + "\n")
    elif case == "wrong-row-count":
        (folder / "bob.csv").write_text("\n".join(text[:-1]) + "\n")
    elif case == "missing-csv":
        extra["bob"] = []
        (folder / "bob.csv").unlink()
    elif case == "port-taken":
        port = json.loads((folder / "shared.json").read_text())["ports"][2]  # MPyC's order: helper, alice, bob
        held = socket.socket()
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("127.0.0.1", port))
        held.listen()
    elif case == "another-runs-config":
        configure(folder, "other.json", epsilon=2.0)
        shared = json.loads((folder / "shared.json").read_text())
        other = json.loads((folder / "other.json").read_text())
        other["ports"] = shared["ports"]  # the same machine and ports, another run's budget
        (folder / "other.json").write_text(json.dumps(other))
        configs["bob"] = "other.json"
    elif case == "edited-epsilon":
        edited = json.loads((folder / "shared.json").read_text())
        edited["budget"]["epsilon"] = 100.0
        (folder / "edited.json").write_text(json.dumps(edited))
        configs["alice"] = "edited.json"
    elif case == "journal-with-less-left":
        cli("ledger", "init", "bob.jsonl", "--epsilon", 0.5, "--delta", 1e-6, cwd=folder)
    elif case == "tampered-journal":
        cli("ledger", "init", "helper.jsonl", "--epsilon", 5, "--delta", 1e-6, cwd=folder)
        lines = (folder / "helper.jsonl").read_text().splitlines()
        lines[0] = lines[0].replace('"epsilon": 5', '"epsilon": 50').replace('"epsilon":5', '"epsilon":50')
        (folder / "helper.jsonl").write_text("\n".join(lines) + "\n")
    elif case == "report-folder-missing":
        extra["alice"] = ["--report", "no/such/folder/alice.html"]
    elif case == "report-extension":
        extra["bob"] = ["--report", "bob.pdf"]
    else:
        raise SystemExit(f"unknown case {case}")
    return configs, extra, held


CASES = ("nan-in-csv", "text-in-csv", "missing-label-column", "missing-column", "wrong-row-count", "missing-csv", "port-taken",
         "another-runs-config", "edited-epsilon", "journal-with-less-left", "tampered-journal", "report-folder-missing",
         "report-extension")


def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {n: (folder / f"{n}.jsonl").read_bytes() if (folder / f"{n}.jsonl").exists() else None for n in PARTIES}


def run_case(case: str, timeout: float = 20.0) -> dict[str, object]:
    folder = Path(tempfile.mkdtemp(prefix="privsdr-failures-"))
    procs: dict[str, subprocess.Popen[str]] = {}
    held = None
    try:
        write_data(folder)
        configure(folder, timeout=timeout)
        configs, extra, held = fault(case, folder)
        before = snapshot(folder)
        start = time.monotonic()
        for name, args in commands(folder, configs, extra).items():
            procs[name] = subprocess.Popen([*CLI, *args], cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                           start_new_session=True)
        outputs = {name: p.communicate(timeout=timeout + 60) for name, p in procs.items()}
        seconds = time.monotonic() - start
        after = snapshot(folder)
        return {"case": case, "seconds": round(seconds, 1), "codes": {n: procs[n].returncode for n in PARTIES},
                "journals_unchanged": before == after, "changed": [n for n in PARTIES if before[n] != after[n]],
                "messages": {n: (outputs[n][1].strip().splitlines() or [""])[-1][:400] for n in PARTIES}}
    finally:
        for p in procs.values():  # exactly the processes started here, with the party processes they started
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if held is not None:
            held.close()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))  # the finally blocks end what was started
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="")
    parser.add_argument("--timeout", type=float, default=20.0, help="the configuration's --timeout (seconds)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    for case in CASES:
        if args.only in case:
            row = run_case(case, args.timeout)
            if args.json:
                print(json.dumps(row), flush=True)
                continue
            print(f"{case:<24} {row['seconds']:>5} s  exit {row['codes']}  journals unchanged: {row['journals_unchanged']} "
                  f"{row['changed'] or ''}", flush=True)
            for name, line in row["messages"].items():  # type: ignore[union-attr]
                print(f"    {name:<6} {line}", flush=True)


if __name__ == "__main__":
    main()
