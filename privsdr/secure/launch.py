"""Starting the parties of a secure aggregation as real processes, and ending exactly those.

``Parties(job, inputs, names)`` starts ``python -m privsdr.secure.party`` once for each of ``names`` (several at
once in their own groups: each forked from this process's fork server, a fresh interpreter that holds public
modules only, ``forks``; otherwise a fresh interpreter each) (MPyC's
options come from the job: ``party``; ``run_parties`` first gives the job free ports on 127.0.0.1 when it names no
addresses, ``job.with_addresses``) and writes each one's public job and statistics on its stdin (a secure Gram's data
party: its rows after ``go``, frame by frame as its process reads them, ``PartyProcess._stream``): nothing of a party's
data, noised or not, is written to disk (issue 36), and what a party reports comes back on its stdout. ``agree()``
waits until every process reports that all parties hold the same public job and are ready; ``finish(charge)``
calls ``charge()``, writes ``go`` to each process (only then does it draw its noise shares) and waits for the
opened sum (every party must have opened the same one). Each raises ``PartyFailed`` naming the party that failed,
refused, lost a peer or never got connected; leaving the ``with`` block ends every process it started (by process
group or PID), whatever happened. The job's timeout bounds every wait.

Channels (issue 36): with ``job.tls`` every party process runs in a private working directory (in a folder of mode
0700) whose ``.config`` holds links to its own key, certificate and the CA only (``certificates.private_config``),
which MPyC's ``--ssl`` reads; the folder is removed as soon as every party here has connected (MPyC has loaded its
certificates by then) and whatever happens. It holds links and, without ``certificates`` and only when every
address is loopback, a CA and keys made for this run; never a statistic. ``certificates``: each party's folder
(``privsdr secure keys``); ``run_own_party`` needs this party's folder whenever the job is TLS.

``run_parties`` (every party here) and ``run_own_party`` (one party; the others run elsewhere) are the two uses.
Charging (issue 33): ``charge`` runs only after the agreement, so a disagreement, a party that is not ready or one
that never connects ends the run with ``charge`` never called (``PartyFailed.charged`` False).

Ending (issue 36): while processes run, SIGTERM and SIGHUP in the launcher's main thread raise ``Interrupted`` (a
``KeyboardInterrupt``, as SIGINT does) where the launcher is, so every ``finally`` ends the processes and a run
that charged is closed as failed. If the launcher is killed outright (SIGKILL), Linux kills its party processes
(each asks for ``PR_SET_PDEATHSIG``, ``party.die_with_launcher``, against the launcher or, for a forked party, the fork
server, which ends its parties and exits when the launcher's end of its socket closes), and they stop when their stdin
closes; there is
no statistic on disk (a launcher killed before its parties connected leaves its private folder of links and
run keys behind). ``run_own_party`` keeps the process in the caller's process group (whoever ends the
caller's group ends it too); ``run_parties`` gives each a group of its own and ends them by group.
"""
from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from ..errors import PrivsdrError, ValidationError
from ..network.addresses import free_ports
from ..network.certificates import Credentials, load_credentials, make_keys, party_credentials, private_config
from . import forks
from .crossproducts import CrossProducts, row_frames
from .forks import ForkedProcess, ForkServer
from .job import AggregationJob
from .party import EXIT_DISAGREED, EXIT_UNCHARGED, LAUNCHER_ENV, ShareRefused, check_gram_input

__all__ = ["GRACE", "Interrupted", "Opened", "Parties", "PartyFailed", "free_ports", "interrupts", "own_party", "run_own_party",
           "run_parties"]

#: seconds on top of the job's timeout before the launcher gives up on a party (its own watchdog fires first)
GRACE = 5.0
#: the longest a wait for the parties sleeps before it looks at the deadline again (a stage or an exit wakes it at once)
POLL = 0.05


class PartyFailed(PrivsdrError, RuntimeError):
    """A party of a secure aggregation failed, refused, or timed out; every party process was ended."""

    def __init__(self, message: str, party: str | None, pids: tuple[int, ...] = (), charged: bool = True) -> None:
        super().__init__(message)
        self.party = party
        self.pids = pids  #: the processes that were started (all ended)
        self.charged = charged  #: whether ``charge`` had been called (False: the parties never agreed; nothing spent)


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
    #: party -> its connections as its process held them: {"tls": bool, "peer_certificates": {peer: names}, and with TLS
    #: "trusted_cas": the CAs its dialing side trusted} (``party``)
    channels: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    #: party -> its process's peak resident memory in KiB, as it reported it when done (``party.peak_rss_kib``)
    peak_rss_kib: Mapping[str, int] = attrs.field(factory=dict)


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP reached the launcher (``interrupts``): raised where it was, as SIGINT's KeyboardInterrupt is."""


@contextlib.contextmanager
def interrupts() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise ``Interrupted`` in the main thread (elsewhere: no change), so that
    every ``finally`` and ``with`` block runs: party processes ended, pending files removed, the run closed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise Interrupted(f"stopped by {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _charged_note(charged: bool) -> str:
    return ("; the nodes had been charged when every party was ready; nothing was released" if charged else
            "; nothing was charged (the parties never all agreed on the public job)")


class PartyProcess:
    """One party process: its job and input written on its stdin, its reports (stdout) and errors (stderr) read by
    daemon threads into memory."""

    def __init__(self, job: AggregationJob, index: int, inputs: Mapping[str, Any] | None, workdir: Path, *,
                 record_view: bool = False, python: str | None = None, decline: str | None = None, own_group: bool = True,
                 routes: Mapping[int, str] | None = None, changed: threading.Event | None = None,
                 server: ForkServer | None = None) -> None:
        self.name, self.job = job.parties[index], job
        #: set whenever the process reports a stage, writes an error line or ends (``Parties._wait`` waits on it)
        self.changed = changed if changed is not None else threading.Event()
        self.messages: list[dict[str, Any]] = []
        self.errors: deque[str] = deque(maxlen=50)
        if inputs is not None and job.products is not None and decline is None:
            try:  # its rows go after the charge: checked here, before its process can agree (as a party checks its own)
                check_gram_input(job, self.name, inputs)
            except ShareRefused as exc:
                decline = "it refused its own input"
                self.messages.append({"stage": "refused", "why": str(exc)})
                self.errors.append(f"party {self.name!r} refused: {exc}")
        argv = ["--index", str(index), "--digest", job.digest()]
        if decline is not None:
            argv += ["--decline", decline]
        if record_view:
            argv.append("--record-view")
        argv += [f"--route={j}={address}" for j, address in (routes or {}).items()]
        self.proc = _start(argv, workdir, python, own_group, server)
        self._readers = [threading.Thread(target=self._read_messages, daemon=True),
                         threading.Thread(target=self._read_errors, daemon=True)]
        for reader in self._readers:
            reader.start()
        payload = b""
        header: dict[str, Any] = {"job": job.to_dict()}
        self._rows: Mapping[str, Any] | None = None
        self.stream_error: str | None = None
        self._streamer: threading.Thread | None = None
        if inputs is not None and job.products is not None:  # a secure Gram's data party: its rows go after ``go``
            self._rows, header["rows"] = inputs, True
        elif inputs is not None:
            arrays: dict[str, Any] = {k: np.asarray(v) if np.asarray(v).dtype.kind in "iu" else np.asarray(v, dtype=float) for k, v in inputs.items()}
            buffer = io.BytesIO()
            np.savez(buffer, **arrays)
            payload = buffer.getvalue()
        header["input"] = len(payload)
        # written by a thread: the next party process starts while this one is still importing and reading
        self._writer = threading.Thread(target=self._send, args=(json.dumps(header).encode() + b"\n" + payload,), daemon=True)
        self._writer.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _send(self, data: bytes) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the process is gone: its exit code and stderr say why

    def _read_messages(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and "stage" in message:
                self.messages.append(message)
                self.changed.set()
        with contextlib.suppress(Exception):  # its stdout closes as it exits: reap it, so that waiters see its exit code now
            self.proc.wait()
        self.changed.set()

    def _read_errors(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            text = line.decode(errors="replace").strip()
            if text:
                self.errors.append(text)
                self.changed.set()

    @property
    def stages(self) -> list[str]:
        return [str(m["stage"]) for m in list(self.messages)]

    def go(self) -> None:
        """The nodes are charged: let the process draw its noise shares and compute (and stream a Gram party's rows)."""
        self._writer.join()
        self._send(b"go\n")
        if self._rows is not None:
            self._streamer = threading.Thread(target=self._stream, daemon=True)
            self._streamer.start()

    def _stream(self) -> None:
        """A secure Gram party's rows, frame by frame as its cross-products loop reads them (``party.FrameReader``:
        ``share_rows`` rows of each of its groups, raw int64); the pipe's back-pressure keeps a frame or two in flight.
        If its rows fail (a second pass of its chunks that differs from the first), stdin is closed: the process stops
        and ``why`` says what failed here."""
        products, rows, stdin = self.job.products, self._rows, self.proc.stdin
        assert products is not None and rows is not None and stdin is not None
        try:
            stream_rows(stdin.write, products, self.name, rows)
            stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the process is gone: its exit code and stderr say why
        except Exception as exc:  # noqa: BLE001 - reported by ``why``; the process stops at the end of its stdin
            self.stream_error = f"its launcher could not stream its rows: {exc}"
            with contextlib.suppress(OSError, ValueError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()

    def uncharged(self) -> None:
        """The charge failed here: the process tells its peers (the charged round) and stops without drawing."""
        self._writer.join()
        self._send(b"uncharged\n")

    def why(self) -> str:
        """The process's last error line, else its stages."""
        self.settle()
        if self.stream_error is not None:
            return self.stream_error
        return (self.errors[-1] if self.errors else "") or ", ".join(self.stages) or "no output"

    def settle(self, seconds: float = 1.0) -> None:
        """Give the readers a moment to take in what an ended process wrote last."""
        if self.proc.poll() is not None:
            for reader in self._readers:
                reader.join(seconds)

    def channels(self) -> dict[str, Any]:
        """What the process recorded about its connections when MPyC had connected every party."""
        for m in list(self.messages):
            if m["stage"] == "connected":
                return {"tls": m.get("tls"), "peer_certificates": m.get("peer_certificates", {}),
                        **({"trusted_cas": m["trusted_cas"]} if "trusted_cas" in m else {})}
        return {}

    def peak_rss_kib(self) -> int:
        """The peak resident memory the process reported when done (KiB; 0 if it did not)."""
        done = [m for m in list(self.messages) if m["stage"] == "done"]
        return int(done[-1].get("peak_rss_kib", 0)) if done else 0

    def refusals(self) -> list[str]:
        """The connections it refused (a certificate that did not name the party it claimed)."""
        return [str(m.get("why", "")) for m in list(self.messages) if m["stage"] == "refused connection"]

    def output(self) -> dict[str, np.ndarray]:
        self.settle(5.0)
        done = [m for m in self.messages if m["stage"] == "done" and "output" in m]
        if not done:
            raise PartyFailed(f"party {self.name!r} finished without its opened sum", self.name, (self.pid,))
        with np.load(io.BytesIO(base64.b64decode(done[-1]["output"])), allow_pickle=False) as data:
            return {k: np.array(data[k]) for k in data.files}

    def end(self) -> None:
        """End the process (its own process group, or by PID in the caller's) and reap it; close the pipes."""
        proc = self.proc
        if isinstance(proc, ForkedProcess):  # checked and signalled under its lock: its PID is not released between
            with contextlib.suppress(ProcessLookupError):
                proc.signal_group(signal.SIGKILL)
        elif proc.poll() is None:
            try:
                if os.getpgid(proc.pid) == proc.pid:
                    os.killpg(proc.pid, signal.SIGKILL)
                else:
                    proc.kill()
            except ProcessLookupError:
                pass
        proc.wait()
        self._writer.join(1.0)
        if self._streamer is not None:
            self._streamer.join(1.0)
        for reader in self._readers:
            reader.join(1.0)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError, ValueError):
                if stream is not None:
                    stream.close()


def stream_rows(write: Callable[[bytes], Any], products: CrossProducts, name: str, rows: Mapping[str, Any]) -> None:
    """Write party ``name``'s rows (its groups' arrays or ``crossproducts.ColumnStream``s, by key) as its process reads
    them (``party.FrameReader``): for each chunk of ``products.share_rows`` rows, each of its groups in the layout's
    order as raw little-endian int64. A stream that gives fewer or more rows than N raises ``ValidationError``."""
    groups = products.owned(name)
    frames = [row_frames(rows[g.key], products.share_rows, g.width) for g in groups]
    for start in range(0, products.rows, products.share_rows):
        stop = min(products.rows, start + products.share_rows)
        for group, source in zip(groups, frames, strict=True):
            frame = next(source, None)
            if frame is None or frame.shape != (stop - start, group.width):
                raise ValidationError(f"party {name!r}: its {group.description} gave fewer than the {products.rows} rows its "
                                      "first pass counted")
            write(frame.astype("<i8", copy=False).tobytes())
    if any(next(source, None) is not None for source in frames):
        raise ValidationError(f"party {name!r}: its rows gave more than the {products.rows} rows its first pass counted")


#: the folder that holds the ``privsdr`` package: a party process runs in another working directory
_SOURCE = Path(__file__).resolve().parents[2]


def _pythonpath() -> str:
    return os.pathsep.join(filter(None, [str(_SOURCE), os.environ.get("PYTHONPATH")]))


def _start(argv: list[str], workdir: Path, python: str | None, own_group: bool, server: ForkServer | None) -> subprocess.Popen[bytes] | ForkedProcess:
    """``python -m privsdr.secure.party ARGV`` in ``workdir`` with pipes for stdin, stdout and stderr: forked by
    ``server`` (``forks``: the same process, at the cost of a fork) or, without one, a fresh interpreter."""
    env = {**os.environ, LAUNCHER_ENV: str(os.getpid()), "PYTHONPATH": _pythonpath()}
    if server is not None and python is None and own_group:
        try:
            return server.start(argv, workdir, {**env, LAUNCHER_ENV: str(server.pid)})  # the party's parent: the server
        except OSError:
            pass  # the server is gone or broken (the parties it forked run on): a fresh interpreter, as without one
    return subprocess.Popen([python or sys.executable, "-m", "privsdr.secure.party", *argv], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=own_group, cwd=workdir, env=env)


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


class Parties:
    """The processes of ``names`` (one, or every party of ``job``), from start to end (module docstring)."""

    def __init__(self, job: AggregationJob, inputs: Mapping[str, Mapping[str, Any] | None], names: Sequence[str], *,
                 certificates: str | Path | Mapping[str, str | Path] | None = None,
                 credentials: Mapping[str, Credentials] | None = None, routes: Mapping[str, Mapping[int, str]] | None = None,
                 record_view: bool = False, python: str | None = None, decline: str | None = None,
                 own_group: bool = True, progress: Callable[[str], None] | None = None, every: float = 5.0) -> None:
        if not job.addresses:
            raise PrivsdrError("the parties need every party's address in the job (host:port each)")
        self.job, self.names = job, list(names)
        self._inputs, self._certificates, self._credentials, self._routes = inputs, certificates, credentials, routes or {}
        self._options = {"record_view": record_view, "python": python, "decline": decline, "own_group": own_group}
        self.progress, self.every = progress, every
        self.procs: dict[str, PartyProcess] = {}
        self.changed = threading.Event()  #: set by every process's readers (``PartyProcess.changed``)
        self.charged = False
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Parties:
        self._stack.enter_context(interrupts())
        self._stack.callback(self.close)
        try:
            self.start = time.monotonic()
            self.deadline = self.start + self.job.timeout + GRACE
            self.folder = Path(tempfile.mkdtemp(prefix="privsdr-secure-")).resolve()
            os.chmod(self.folder, 0o700)
            credentials = dict(self._credentials) if self._credentials is not None else \
                credentials_for(self.job, self._certificates, self.folder)
            server = (forks.server_for(len(self.names), _pythonpath())
                      if self._options["python"] is None and self._options["own_group"] else None)
            for name in self.names:
                workdir = self.folder / f"party{self.job.index(name)}"
                if name in credentials:
                    private_config(credentials[name], workdir)
                else:
                    workdir.mkdir(mode=0o700)
                self.procs[name] = PartyProcess(self.job, self.job.index(name), self._inputs.get(name), workdir,
                                                routes=self._routes.get(name), changed=self.changed, server=server,
                                                **self._options)  # type: ignore[arg-type]
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def close(self) -> None:
        for proc in self.procs.values():  # exactly the processes started here
            proc.end()
        self._remove_folder()

    def _remove_folder(self) -> None:
        """The private folder (links to certificates, run keys): not needed once every party here has connected."""
        folder = getattr(self, "folder", None)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(p.pid for p in self.procs.values())

    def agree(self) -> None:
        """Wait until every process here has agreed (raises ``PartyFailed``, nothing charged, otherwise)."""
        self._wait(lambda: all("agreed" in p.stages for p in self.procs.values()))
        self._remove_folder()  # every party connected: MPyC has read its certificates

    def finish(self, charge: Callable[[], None] | None = None) -> Opened:
        """Charge (``charge()``), let the processes compute, and collect the opened sum. If ``charge()`` raises, every
        process here is told (``uncharged``), tells its peers in the charged round and stops before drawing a noise
        share; this waits for them (bounded by the job's timeout), then re-raises."""
        if charge is not None:
            try:
                charge()
            except BaseException:
                for proc in self.procs.values():
                    proc.uncharged()
                while time.monotonic() < self.deadline and any(p.proc.poll() is None for p in self.procs.values()):
                    time.sleep(0.02)
                raise
        self.charged = True
        for proc in self.procs.values():
            proc.go()
        self._wait(lambda: all(p.proc.poll() == 0 for p in self.procs.values()))
        opened, sent, views, receipts = [], {}, {}, {}
        for name, proc in self.procs.items():
            data = proc.output()
            opened.append(np.array(data["aggregate"], dtype=np.int64))
            sent[name] = int(data["bytes_sent"])
            views[name] = {k.split("/", 1)[1]: np.array([int(v) for v in data[k]], dtype=object) for k in data
                           if k.startswith("view/") and not k.startswith("view/receipts/")}
            receipts[name] = {k.rsplit("/", 1)[1]: {peer: int(n) for peer, n in (str(v).split("=") for v in data[k])}
                              for k in data if k.startswith("view/receipts/")}
        if any(not np.array_equal(opened[0], o) for o in opened[1:]):
            raise PartyFailed("the parties opened different sums" + _charged_note(True), None, self.pids)
        channels = {name: proc.channels() for name, proc in self.procs.items()}
        return Opened(opened[0], views, time.monotonic() - self.start, sent, self.pids, receipts, channels,
                      {name: proc.peak_rss_kib() for name, proc in self.procs.items()})

    def _wait(self, done: Callable[[], bool]) -> None:
        """Until ``done()``, woken by the processes' readers as soon as one reports a stage or ends (``changed``; at
        least every ``POLL`` seconds for the deadline and ``progress``); raises ``PartyFailed`` when a process fails."""
        told = time.monotonic()
        while True:
            self.changed.clear()  # before the checks: whatever happens after them wakes the wait below at once
            failed = [(n, code) for n, p in self.procs.items() if (code := p.proc.poll() or 0) != 0]
            if failed:  # a party whose rows this launcher could not stream stopped the others: name it
                streamed = [(n, p.proc.wait(GRACE)) for n, p in self.procs.items() if p.stream_error is not None]
                self._failed(*(streamed or failed)[0])
            if done():
                return
            now = time.monotonic()
            if now > self.deadline:
                self._timed_out()
            if self.progress is not None and now - told >= self.every:
                for name, proc in self.procs.items():
                    stages = proc.stages
                    where = ("agreed, computing" if "agreed" in stages else "connected, agreeing on the public job" if "connected" in stages
                             else "waiting for the other parties to connect")
                    self.progress(f"[{name}] {where} ({now - self.start:.0f} s of at most {self.job.timeout:g} s)")
                told = now
            self.changed.wait(POLL)

    def _failed(self, name: str, code: int) -> None:
        proc = self.procs[name]
        if code == EXIT_DISAGREED and len(self.procs) > 1:  # every party stops at the agreement: name the one not ready
            settle = min(self.deadline, time.monotonic() + GRACE)
            while time.monotonic() < settle and any(p.proc.poll() is None for p in self.procs.values()):
                time.sleep(0.02)
            refused = [n for n, p in self.procs.items() if "refused" in p.stages]
            name = refused[0] if refused else name
            proc = self.procs[name]
        why = proc.why()
        if code == EXIT_UNCHARGED:  # after the ready point a party's ledger refused the charge: its child's line names it
            who = [str(w) for m in list(proc.messages) if m["stage"] == "uncharged" for w in m.get("parties", [])]
            raise PartyFailed(f"{why}; {'its process was' if len(self.procs) == 1 else 'every party process was'} ended"
                              + ("; this party's nodes had been charged" if self.charged else ""), who[0] if who else name,
                              self.pids, self.charged)
        if len(self.procs) == 1:
            if code == EXIT_DISAGREED:  # the child's own line says who disagreed and that nothing was charged
                raise PartyFailed(f"{why}; its process was ended", name, self.pids, self.charged)
            if "timed out" in proc.stages:
                why = ("timed out: " if "connected" in proc.stages else "timed out waiting for the other parties: ") + why
            raise PartyFailed(f"party {name!r} did not finish ({why}); its process was ended{_charged_note(self.charged)}", name,
                              self.pids, self.charged)
        raise PartyFailed(f"party {name!r} ended with exit code {code} ({why}); every party process was ended"
                          f"{_charged_note(self.charged)}", name, self.pids, self.charged)

    def _timed_out(self) -> None:
        stuck = [n for n, p in self.procs.items() if "connected" not in p.stages]
        if len(self.procs) == 1:
            name = self.names[0]
            how = "timed out waiting for the other parties" if stuck else "timed out"
            refusals = self.procs[name].refusals()
            if refusals:
                how += f" (refused: {refusals[0]})"
            raise PartyFailed(f"party {name!r} did not finish ({how}: {self.procs[name].why()}); its process was ended"
                              f"{_charged_note(self.charged)}", name, self.pids, self.charged)
        who = f"{', '.join(stuck)} never connected" if stuck else "every party connected but the computation did not finish"
        refusals = [r for p in self.procs.values() for r in p.refusals()]
        if refusals:
            who += f"; refused: {refusals[0]}" + (f" (and {len(refusals) - 1} more)" if len(refusals) > 1 else "")
        raise PartyFailed(f"the secure aggregation timed out after {self.job.timeout:g} s ({who}); every party process was "
                          f"ended{_charged_note(self.charged)}", stuck[0] if stuck else None, self.pids, self.charged)


def run_own_party(job: AggregationJob, name: str, inputs: Mapping[str, np.ndarray] | None, *,
                  certificates: str | Path | None = None, charge: Callable[[], None] | None = None, decline: str | None = None,
                  progress: Any = None, every: float = 5.0, python: str | None = None) -> Opened:
    """Run only party ``name`` of ``job`` (the others run elsewhere, each with the same job, at the job's addresses):
    start its process, call ``charge()`` once every party has agreed on the public job (module docstring), report its
    stage to ``progress(line)`` every ``every`` seconds, bound the wait by the job's timeout, end the process whatever
    happens. ``certificates``: this party's folder (required with TLS). ``decline``: take part in the agreement only,
    as not ready for this reason (the others then stop with nothing charged); raises ``PartyFailed``."""
    with own_party(job, name, inputs, certificates=certificates, decline=decline, progress=progress, every=every,
                   python=python) as party:
        party.agree()
        return party.finish(charge)


def own_party(job: AggregationJob, name: str, inputs: Mapping[str, np.ndarray] | None, *, certificates: str | Path | None = None,
              decline: str | None = None, progress: Any = None, every: float = 5.0, python: str | None = None) -> Parties:
    """The ``Parties`` of party ``name`` alone (``run_own_party``), in the caller's process group; enter it to start."""
    if not job.addresses:
        raise PrivsdrError("one party's run needs every party's address in the job (host:port each)")
    credentials: dict[str, Credentials] = {}
    if job.tls:
        if certificates is None:
            raise PrivsdrError(f"this run uses TLS: party {name!r} needs its certificate folder (`privsdr secure keys`; --certs), "
                               "or every party's configuration must ask for plaintext; nothing was charged")
        credentials[name] = load_credentials(certificates, job.index(name))
    return Parties(job, {name: inputs}, [name], credentials=credentials, decline=decline, own_group=False,
                   progress=progress, every=every, python=python)


def check_inputs_given(job: AggregationJob, inputs: Mapping[str, Any]) -> None:
    """Every party that contributes to ``job`` (or holds a secure Gram's columns) has its statistics in ``inputs``."""
    missing = [p for p in (job.inputs if job.products is None else job.products.parties) if p not in inputs]
    if missing:
        raise ValidationError(f"no statistics for the contributing parties {missing}")


def run_parties(job: AggregationJob, inputs: Mapping[str, Mapping[str, np.ndarray]], *, charge: Callable[[], None] | None = None,
                record_view: bool = False, python: str | None = None, certificates: str | Path | Mapping[str, str | Path] | None = None,
                routes: Mapping[str, Mapping[int, str]] | None = None) -> Opened:
    """Run the aggregation ``job`` with each contributor's statistics ``inputs[party][node]``; ``charge()`` once
    every party process has agreed on the public job (module docstring). ``certificates``: party -> its folder, or
    the folder of ``privsdr secure keys`` (default with TLS on loopback: made for this run); ``routes``: party ->
    {peer index: address it dials instead}."""
    check_inputs_given(job, inputs)
    job = job.with_addresses()
    with Parties(job, inputs, job.parties, certificates=certificates, routes=routes, record_view=record_view,
                 python=python) as parties:
        parties.agree()
        return parties.finish(charge)
