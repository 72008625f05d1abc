"""One party of a secure aggregation, as its own process (the only module that imports ``mpyc.runtime``).

    python -m privsdr.secure.party --job JOB.json --index I --output OUT.npz [--input IN.npz] [--status S.jsonl]
                                   [--record-view]  -M m -I i -T t -P 127.0.0.1:PORT_0 ... -P 127.0.0.1:PORT_{m-1}

A contributing party rounds each of its statistics to the node's public grid, adds its own exact discrete Gaussian
share (Canonne, Kamath & Steinke 2020 sampler, operating-system randomness) and inputs the integer vector into the
secure computation; every party (contributing or not) inputs the same secure type, MPyC's SecInt of the job's
bit length, so that the parties agree on it; the vectors are added on their Shamir shares and only the sum is
opened, to every party. Nothing else leaves the party: its statistic and its share stay in its process.

MPyC listens on every interface by default; this program binds its listening socket to 127.0.0.1 (the event loop
is replaced before MPyC is imported), and the launcher gives 127.0.0.1 addresses for every party. A watchdog ends
the process after the job's timeout (exit code 4), so a party whose peers dropped out never waits for ever.

``--record-view`` also writes what this party received for each other contributor's vector (its Shamir share, a
field element per coordinate): the tests check that it does not depend on that contributor's data.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..mechanisms import secure as exact
from .job import AggregationJob

EXIT_TIMEOUT = 4
EXIT_REFUSED = 5


class ShareRefused(RuntimeError):
    """This party refuses to send: its statistic is beyond the public bound, or its own share beyond the tail bound."""


def local_vector(job: AggregationJob, values: Mapping[str, Any]) -> np.ndarray:
    """The integer vector this party sends: per node, round(x / gamma) + its own noise share (module docstring)."""
    parts = []
    for node in job.nodes:
        if node.name not in values:
            raise ShareRefused(f"no statistic {node.name!r} in this party's input")
        x = np.asarray(values[node.name], dtype=float)
        if node.square is not None:
            if x.shape != (node.square, node.square):
                raise ShareRefused(f"{node.name!r} must be a {node.square} x {node.square} matrix, got {x.shape}")
            x = x[np.triu_indices(node.square)]
        x = x.ravel()
        if x.size != node.dimension or not np.all(np.isfinite(x)):
            raise ShareRefused(f"{node.name!r} must be {node.dimension} finite numbers, got {x.size}")
        if np.any(np.abs(x) > node.bound * (1.0 + 1e-12)):
            raise ShareRefused(f"{node.name!r} exceeds its public bound {node.bound:g}: the statistic must be clipped first")
        q = np.array([round(float(v) / node.gamma) for v in x], dtype=np.int64)
        num, den = node.sigma_local2
        if num > 0:
            e = np.array([exact._discrete_gaussian(num, den) for _ in range(node.dimension)], dtype=object)
            if np.any(np.abs(e) > node.share_bound):  # probability below exp(-800): decided by the noise alone
                raise ShareRefused(f"the noise share of {node.name!r} fell beyond {node.share_bound}; run again")
            q = q + e.astype(np.int64)
        parts.append(q)
    return np.concatenate(parts).astype(np.int64)


def _status(path: str | None, stage: str, **extra: Any) -> None:
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"stage": stage, "time": time.time(), "pid": os.getpid(), **extra}) + "\n")


def _loopback_event_loop() -> None:
    """An event loop whose servers listen on 127.0.0.1 unless told otherwise (MPyC passes no host)."""

    class LoopbackLoop(asyncio.SelectorEventLoop):
        async def create_server(self, protocol_factory: Any, host: Any = None, port: Any = None, **kwargs: Any) -> Any:
            return await super().create_server(protocol_factory, host if host is not None else "127.0.0.1", port, **kwargs)

    asyncio.set_event_loop(LoopbackLoop())


async def _aggregate(mpc: Any, job: AggregationJob, vector: np.ndarray | None, record_view: bool,
                     status: str | None) -> tuple[np.ndarray, dict[str, np.ndarray], int]:
    await mpc.start()
    _status(status, "connected")
    secint = mpc.SecInt(job.bits)
    d = job.dimension
    mine = secint.array(vector if vector is not None else np.zeros(d, dtype=np.int64))  # same type for every party
    senders = [job.index(name) for name in job.inputs]
    shares = mpc.input(mine, senders=senders)
    view: dict[str, np.ndarray] = {}
    if record_view:
        for name, share in zip(job.inputs, shares, strict=True):
            if job.index(name) != mpc.pid:
                received = await mpc.gather(share.share)
                view[name] = np.array([int(v) for v in np.asarray(received.value).ravel()], dtype=object)
    _status(status, "input")
    total = shares[0]
    for share in shares[1:]:
        total = total + share
    opened = await mpc.output(total)
    _status(status, "opened")
    sent = sum(peer.protocol.nbytes_sent for peer in mpc.parties if peer.pid != mpc.pid and peer.protocol is not None)
    await mpc.shutdown()
    return np.asarray(opened, dtype=np.int64).ravel(), view, int(sent)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m privsdr.secure.party", add_help=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--input", default=None)
    parser.add_argument("--status", default=None)
    parser.add_argument("--record-view", action="store_true")
    args, mpc_argv = parser.parse_known_args(sys.argv[1:] if argv is None else list(argv))
    job = AggregationJob.from_json(Path(args.job).read_text())
    name = job.parties[args.index]
    _status(args.status, "started", party=name)
    def expire() -> None:
        _status(args.status, "timed out")
        os._exit(EXIT_TIMEOUT)

    watchdog = threading.Timer(job.timeout, expire)
    watchdog.daemon = True
    watchdog.start()
    vector = None
    if name in job.inputs:
        if args.input is None:
            print(f"party {name!r} contributes to this aggregation: give --input", file=sys.stderr)
            return 2
        with np.load(args.input) as data:
            try:
                vector = local_vector(job, {k: data[k] for k in data.files})
            except ShareRefused as exc:
                _status(args.status, "refused", why=str(exc))
                print(f"party {name!r} refused: {exc}", file=sys.stderr)
                return EXIT_REFUSED
    os.environ.setdefault("MPYC_NOUVLOOP", "1")
    _loopback_event_loop()
    sys.argv = [sys.argv[0], *mpc_argv, "--no-log"]
    from mpyc.runtime import mpc  # parses sys.argv: -M, -I, -T, -P

    opened, view, sent = mpc.run(_aggregate(mpc, job, vector, args.record_view, args.status))
    arrays = {"aggregate": opened, "bytes_sent": np.array(sent, dtype=np.int64), **{f"view/{k}": v.astype(str) for k, v in view.items()}}
    tmp = args.output + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, args.output)
    _status(args.status, "done")
    watchdog.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(main())
