"""Starting the parties of a secure aggregation as real processes, and ending exactly those.

``run_parties(job, inputs)`` writes the public job and each contributor's statistics into a private temporary
folder (mode 0700), gives the job free ports on 127.0.0.1 when it names no addresses (``job.with_addresses``),
starts ``python -m privsdr.secure.party`` once per party (MPyC's options come from the job: ``party``), and waits.
It returns the opened sum (every party must have opened the same one) or raises ``PartyFailed`` naming the party
that failed, refused or never got connected, after ending every process it started (by PID, also when the caller
is interrupted). The job's timeout bounds the wait.

Channels (issue 36): with ``job.tls`` every party process runs in a private working directory whose ``.config``
holds links to its own key, certificate and the CA only (``certificates.private_config``), which MPyC's ``--ssl``
reads. ``certificates``: each party's folder (``privsdr secure keys``); without it, and only when every address is
loopback, ``run_parties`` makes a CA and the parties' keys for this run in its private folder (deleted with it).
``run_own_party`` needs this party's folder whenever the job is TLS.

Charging (issue 33): ``charge()`` is called only when the party processes report that every party holds the same
public job and is ready (``party``: the digest exchange); then the launcher opens each process's gate and only then
do the processes draw their noise shares. A disagreement, a party that is not ready or one that never connects ends
the run with ``charge`` never called: ``PartyFailed.charged`` is False and the message says nothing was charged.
``run_own_party`` starts its process in the caller's process group, so whoever ends the caller's group (a shell, a
test) ends it too; ``run_parties`` starts each in a group of its own and ends them by group.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from ..errors import PrivsdrError
from .addresses import free_ports
from .certificates import Credentials, load_credentials, make_keys, party_credentials, private_config
from .job import AggregationJob
from .party import EXIT_DISAGREED

__all__ = ["GRACE", "Opened", "PartyFailed", "free_ports", "open_gates", "run_own_party", "run_parties"]

#: seconds on top of the job's timeout before the launcher gives up on a party (its own watchdog fires first)
GRACE = 5.0


class PartyFailed(PrivsdrError, RuntimeError):
    """A party of a secure aggregation failed, refused, or timed out; every party process was ended."""

    def __init__(self, message: str, party: str | None, pids: tuple[int, ...] = (), charged: bool = True) -> None:
        super().__init__(message)
        self.party = party
        self.pids = pids  #: the processes that were started (all ended)
        self.charged = charged  #: whether ``charge`` had been called (False: the parties never agreed; nothing spent)


def _charged_note(charged: bool) -> str:
    return ("; the nodes were charged when every party had agreed, and stay charged" if charged else
            "; nothing was charged (the parties never all agreed on the public job)")


@attrs.frozen(eq=False)
class Opened:
    """What the aggregation opened: the integer sum, and (``record_view``) what each party received."""

    aggregate: np.ndarray
    views: Mapping[str, Mapping[str, np.ndarray]]  #: party -> contributor -> the shares it received
    seconds: float
    bytes_sent: Mapping[str, int]  #: what each party sent to the others (MPyC's own count: payloads plus headers)
    pids: tuple[int, ...] = ()  #: the party processes that ran (all ended)
    #: (``record_view``) party -> MPyC step -> peer -> messages its process received (``party._tally_receipts``)
    receipts: Mapping[str, Mapping[str, Mapping[str, int]]] = attrs.field(factory=dict)
    #: party -> its connections as its process held them: {"tls": bool, "peer_certificates": {peer: names}} (``party``)
    channels: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)


def _stages(path: Path) -> list[str]:
    try:
        return [json.loads(line)["stage"] for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return []


def _connected(path: Path) -> dict[str, Any]:
    """What a party process recorded about its connections when MPyC had connected every party."""
    for line in _read_lines(path):
        record = json.loads(line) if line.strip() else {}
        if record.get("stage") == "connected":
            return {"tls": record.get("tls"), "peer_certificates": record.get("peer_certificates", {})}
    return {}


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text().splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def _start(job: AggregationJob, i: int, folder: Path, inputs: Mapping[str, np.ndarray] | None, credentials: Credentials | None,
           record_view: bool, python: str | None, *, decline: str | None = None, own_group: bool = True,
           routes: Mapping[int, str] | None = None) -> subprocess.Popen[bytes]:
    """Start party ``i`` (its statistics, if any, written into the private folder first) in its own working directory
    (with TLS: links to its ``credentials`` only); it waits for its gate ``go{i}`` after the agreement
    (``open_gates``). ``own_group``: a process group of its own (else the caller's). ``routes``: peer -> the address
    to dial it at instead (``party --route``)."""
    command = [python or sys.executable, "-m", "privsdr.secure.party", "--job", str(folder / "job.json"), "--index", str(i),
               "--output", str(folder / f"out{i}.npz"), "--status", str(folder / f"status{i}.jsonl"),
               "--digest", job.digest(), "--gate", str(folder / f"go{i}")]
    if decline is not None:
        command += ["--decline", decline]
    if inputs is not None:
        arrays: dict[str, Any] = {k: np.asarray(v) if np.asarray(v).dtype.kind in "iu" else np.asarray(v, dtype=float)
                                  for k, v in inputs.items()}
        np.savez(folder / f"in{i}.npz", **arrays)
        command += ["--input", str(folder / f"in{i}.npz")]
    if record_view:
        command.append("--record-view")
    command += [f"--route={j}={address}" for j, address in (routes or {}).items()]
    workdir = folder / f"party{i}"
    if credentials is not None:
        private_config(credentials, workdir)
    else:
        workdir.mkdir(mode=0o700)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_SOURCE), os.environ.get("PYTHONPATH")]))}
    with open(folder / f"err{i}.txt", "wb") as err:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, start_new_session=own_group, cwd=workdir, env=env)


#: the folder that holds the ``privsdr`` package: a party process runs in another working directory
_SOURCE = Path(__file__).resolve().parents[2]


def credentials_for(job: AggregationJob, certificates: str | Path | Mapping[str, str | Path] | None, folder: Path) -> dict[str, Credentials]:
    """Every party's checked credentials for a TLS job (module docstring); none for a plaintext one."""
    if not job.tls:
        return {}
    if certificates is None:
        if not job.loopback:
            raise PrivsdrError("TLS to network addresses needs the parties' own certificates (`privsdr secure keys`, or an "
                               "organisation's CA); nothing was charged")
        certificates = make_keys(folder / "keys", job.parties)  # a CA for this run only, in the private folder
    return party_credentials(certificates, job.parties)


def _refusals(folder: Path, indices: list[int]) -> str:
    """The connections the parties refused (a certificate that did not name the party it claimed), if any."""
    lines = [json.loads(line).get("why", "") for i in indices for line in _read_lines(folder / f"status{i}.jsonl")
             if '"refused connection"' in line]
    return f"; refused: {lines[0]}" + (f" (and {len(lines) - 1} more)" if len(lines) > 1 else "") if lines else ""


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except OSError:
        return []


def _end(proc: subprocess.Popen[bytes]) -> None:
    """End a party process this module started (its own process group, or by PID in the caller's) and reap it."""
    if proc.poll() is None:
        try:
            if os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, 9)
            else:
                proc.kill()
        except ProcessLookupError:
            pass
    proc.wait()


def open_gates(folder: Path, indices: list[int]) -> None:
    """Let these party processes go on after the charge (each waits for its file ``go{i}``)."""
    for i in indices:
        (folder / f"go{i}").touch()


def _agreed(folder: Path, i: int) -> bool:
    return "agreed" in _stages(folder / f"status{i}.jsonl")


def run_own_party(job: AggregationJob, name: str, inputs: Mapping[str, np.ndarray] | None, *,
                  certificates: str | Path | None = None, charge: Callable[[], None] | None = None, decline: str | None = None,
                  progress: Any = None, every: float = 5.0, python: str | None = None) -> Opened:
    """Run only party ``name`` of ``job`` (the others run elsewhere, each with the same job, at the job's addresses):
    start its process, call ``charge()`` once every party has agreed on the public job (module docstring), report its
    stage to ``progress(line)`` every ``every`` seconds while it waits for the others, bound the wait by the job's
    timeout, end the process (by PID) whatever happens. ``certificates``: this party's folder (required with TLS).
    ``decline``: take part in the agreement only, as not ready for this reason (the others then stop with nothing
    charged); raises ``PartyFailed``."""
    if not job.addresses:
        raise PrivsdrError("one party's run needs every party's address in the job (host:port each)")
    i = job.index(name)
    credentials = None
    if job.tls:
        if certificates is None:
            raise PrivsdrError(f"this run uses TLS: party {name!r} needs its certificate folder (`privsdr secure keys`; --certs), "
                               "or every party's configuration must ask for plaintext; nothing was charged")
        credentials = load_credentials(certificates, i)
    folder = Path(tempfile.mkdtemp(prefix="privsdr-secure-")).resolve()
    os.chmod(folder, 0o700)
    start = time.monotonic()
    proc = None
    charged = False
    try:
        (folder / "job.json").write_text(job.to_json())
        proc = _start(job, i, folder, inputs, credentials, False, python, decline=decline, own_group=False)
        deadline, told = start + job.timeout + GRACE, start
        while proc.poll() is None:
            now = time.monotonic()
            if now > deadline:
                break
            if not charged and decline is None and _agreed(folder, i):
                if charge is not None:
                    charge()
                charged = True
                open_gates(folder, [i])
            if progress is not None and now - told >= every:
                stages = _stages(folder / f"status{i}.jsonl")
                where = ("agreed, computing" if "agreed" in stages else "connected, agreeing on the public job" if "connected" in stages
                         else "waiting for the other parties to connect")
                progress(f"[{name}] {where} ({now - start:.0f} s of at most {job.timeout:g} s)")
                told = now
            time.sleep(0.05)
        if proc.poll() != 0:
            stages = _stages(folder / f"status{i}.jsonl")
            why = _last_line(folder / f"err{i}.txt") or ", ".join(stages) or "no output"
            if proc.poll() == EXIT_DISAGREED:  # the child's own line says who disagreed and that nothing was charged
                raise PartyFailed(f"{why}; its process was ended", name, (proc.pid,), charged)
            if proc.poll() is None or "timed out" in stages:
                why = ("timed out: " if "connected" in stages else "timed out waiting for the other parties: ") + why + _refusals(folder, [i])
            raise PartyFailed(f"party {name!r} did not finish ({why}); its process was ended{_charged_note(charged)}", name,
                              (proc.pid,), charged)
        with np.load(folder / f"out{i}.npz") as data:
            aggregate, sent = np.array(data["aggregate"], dtype=np.int64), int(data["bytes_sent"])
        return Opened(aggregate, {}, time.monotonic() - start, {name: sent}, (proc.pid,))
    finally:
        if proc is not None:
            _end(proc)
        shutil.rmtree(folder, ignore_errors=True)


def run_parties(job: AggregationJob, inputs: Mapping[str, Mapping[str, np.ndarray]], *, charge: Callable[[], None] | None = None,
                record_view: bool = False, python: str | None = None, certificates: str | Path | Mapping[str, str | Path] | None = None,
                routes: Mapping[str, Mapping[int, str]] | None = None) -> Opened:
    """Run the aggregation ``job`` with each contributor's statistics ``inputs[party][node]``; ``charge()`` once
    every party process has agreed on the public job (module docstring). ``certificates``: party -> its folder, or
    the folder of ``privsdr secure keys`` (default with TLS on loopback: made for this run); ``routes``: party -> {peer index: address it dials instead}."""
    missing = [p for p in (job.inputs if job.products is None else job.products.parties) if p not in inputs]
    if missing:
        raise PrivsdrError(f"no statistics for the contributing parties {missing}")
    job = job.with_addresses()
    folder = Path(tempfile.mkdtemp(prefix="privsdr-secure-")).resolve()
    os.chmod(folder, 0o700)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    start = time.monotonic()
    charged = False
    try:
        credentials = credentials_for(job, certificates, folder)
        (folder / "job.json").write_text(job.to_json())
        for i, name in enumerate(job.parties):
            procs[name] = _start(job, i, folder, inputs.get(name), credentials.get(name), record_view, python,
                                 routes=(routes or {}).get(name))
        deadline = start + job.timeout + GRACE
        while True:
            failed = [(n, p.returncode) for n, p in procs.items() if p.poll() not in (None, 0)]
            if failed:
                name, code = failed[0]
                i = job.index(name)
                if code == EXIT_DISAGREED:  # every party stops at the agreement: name the one that was not ready
                    settle = min(deadline, time.monotonic() + GRACE)
                    while time.monotonic() < settle and any(p.poll() is None for p in procs.values()):
                        time.sleep(0.02)
                    refused = [n for n in job.parties if "refused" in _stages(folder / f"status{job.index(n)}.jsonl")]
                    name = refused[0] if refused else name
                    i = job.index(name)
                raise PartyFailed(f"party {name!r} ended with exit code {code} ("
                                  f"{_last_line(folder / f'err{i}.txt') or ', '.join(_stages(folder / f'status{i}.jsonl')) or 'no output'})"
                                  f"; every party process was ended{_charged_note(charged)}", name, tuple(p.pid for p in procs.values()),
                                  charged)
            if not charged and all(_agreed(folder, job.index(n)) for n in job.parties):
                if charge is not None:
                    charge()
                charged = True
                open_gates(folder, list(range(len(job.parties))))
            if all(p.poll() == 0 for p in procs.values()):
                break
            if time.monotonic() > deadline:
                stuck = [n for n in job.parties if "connected" not in _stages(folder / f"status{job.index(n)}.jsonl")]
                culprit = stuck[0] if stuck else None
                who = (f"{', '.join(stuck)} never connected" if stuck else "every party connected but the computation did not finish")
                who += _refusals(folder, list(range(len(job.parties))))
                raise PartyFailed(f"the secure aggregation timed out after {job.timeout:g} s ({who}); every party process was "
                                  f"ended{_charged_note(charged)}", culprit, tuple(p.pid for p in procs.values()), charged)
            time.sleep(0.02)
        opened = []
        sent: dict[str, int] = {}
        views: dict[str, dict[str, np.ndarray]] = {}
        receipts: dict[str, dict[str, dict[str, int]]] = {}
        for i, name in enumerate(job.parties):
            with np.load(folder / f"out{i}.npz") as data:
                opened.append(np.array(data["aggregate"], dtype=np.int64))
                sent[name] = int(data["bytes_sent"])
                views[name] = {k.split("/", 1)[1]: np.array([int(v) for v in data[k]], dtype=object) for k in data.files
                               if k.startswith("view/") and not k.startswith("view/receipts/")}
                receipts[name] = {k.rsplit("/", 1)[1]: {peer: int(n) for peer, n in (str(v).split("=") for v in data[k])}
                                  for k in data.files if k.startswith("view/receipts/")}
        if any(not np.array_equal(opened[0], o) for o in opened[1:]):
            raise PartyFailed("the parties opened different sums", None, tuple(p.pid for p in procs.values()))
        seconds = time.monotonic() - start
        channels = {name: _connected(folder / f"status{i}.jsonl") for i, name in enumerate(job.parties)}
        return Opened(opened[0], views, seconds, sent, tuple(p.pid for p in procs.values()), receipts, channels)
    finally:
        for proc in procs.values():  # exactly the processes started here
            _end(proc)
        shutil.rmtree(folder, ignore_errors=True)
