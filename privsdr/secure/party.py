"""One party of a secure aggregation, as its own process (the only module that imports ``mpyc.runtime``).

    python -m privsdr.secure.party --job JOB.json --index I --output OUT.npz [--input IN.npz] [--status S.jsonl]
                                   [--record-view]  -M m -I i -T t -P 127.0.0.1:PORT_0 ... -P 127.0.0.1:PORT_{m-1}

A contributing party rounds each of its statistics to the node's public grid, adds its own exact discrete Gaussian
share (Canonne, Kamath & Steinke 2020 sampler, operating-system randomness) and inputs the integer vector into the
secure computation; every party (contributing or not) inputs the same secure type, MPyC's SecInt of the job's
bit length, so that the parties agree on it; the vectors are added on their Shamir shares and only the sum is
opened, to every party. Nothing else leaves the party: its statistic and its share stay in its process.

A job with ``products`` (a secure Gram of vertically partitioned columns, ``crossproducts``): each data party's
input file holds its integer block (``block``, already clipped and rounded) and, for the label holder, ``label``;
it adds its own diagonal block and its noise shares as above, and also inputs its block as a secret-shared
matrix; the cross-blocks between parties are computed on the shares, and only the noisy total is opened. A helper
(a party without columns) adds a noise share and sees shares only.

MPyC listens on every interface by default; this program binds its listening socket to 127.0.0.1 (the event loop
is replaced before MPyC is imported), and the launcher gives 127.0.0.1 addresses for every party. A watchdog ends
the process after the job's timeout (exit code 4), so a party whose peers dropped out never waits for ever.

``--record-view`` also writes what this party received for each other contributor's vector, block and label (its
Shamir shares, a field element per coordinate), and a tally of every message its process received, by peer and by
the MPyC step that asked for it (``receipts``): the tests check that the shares do not depend on that contributor's
data and that the report's "what each party sees" names exactly what the tally holds (``trust.received``).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
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
        parts.append(np.array([round(float(v) / node.gamma) for v in x], dtype=np.int64))
    return with_shares(job, np.concatenate(parts).astype(np.int64))


def with_shares(job: AggregationJob, q: np.ndarray) -> np.ndarray:
    """The integer vector ``q`` (every node, concatenated, in grid units) plus this party's own noise shares."""
    parts, at = [], 0
    for node in job.nodes:
        part = np.asarray(q[at:at + node.dimension], dtype=np.int64)
        at += node.dimension
        num, den = node.sigma_local2
        if num > 0:
            e = np.array([exact._discrete_gaussian(num, den) for _ in range(node.dimension)], dtype=object)
            if np.any(np.abs(e) > node.share_bound):  # probability below exp(-800): decided by the noise alone
                raise ShareRefused(f"the noise share of {node.name!r} fell beyond {node.share_bound}; run again")
            part = part + e.astype(np.int64)
        parts.append(part)
    return np.concatenate(parts).astype(np.int64)


def gram_input(job: AggregationJob, name: str, data: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """A secure Gram's party: (its local statistics plus noise shares, its integer block, its integer label)."""
    products = job.products
    assert products is not None
    block = label = None
    if name in products.parties:
        if "block" not in data:
            raise ShareRefused("no column block ('block') in this party's input")
        block = np.asarray(data["block"])
        if block.dtype.kind not in "iu" or block.shape != (products.rows, products.width_of(name)):
            raise ShareRefused(f"the block must be a {products.rows} x {products.width_of(name)} integer matrix on the grid")
        if name == products.label:
            if "label" not in data or np.asarray(data["label"]).dtype.kind not in "iu":
                raise ShareRefused("the label holder's input has no integer 'label'")
            label = np.asarray(data["label"], dtype=np.int64)
        limit = max(n.grid_bound for n in job.nodes)  # no entry beyond sqrt of the largest product bound
        if np.any(np.abs(block) > math.isqrt(limit) + 1) or (label is not None and np.any(np.abs(label) > math.isqrt(limit) + 1)):
            raise ShareRefused("the block exceeds the public bounds: it must be clipped and rounded first (crossproducts.party_block)")
    own = products.local_statistics(name, block, label)
    return with_shares(job, np.concatenate([own["xtx"], own["xty"]])), block, label


def party_input(job: AggregationJob, name: str, data: Mapping[str, Any]) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:
    """What party ``name`` inputs into the secure computation: (its vector with its noise shares, or None for a party
    that adds nothing; its integer block and label, secure Gram only). The sensitivity and contributor probes
    (``privsdr.audit.secure_probe``) run the party program through this function."""
    if job.products is not None:
        if name in job.inputs:  # a helper adds a noise share and no statistic
            return gram_input(job, name, data)
        return None, None, None
    if name in job.inputs:
        return local_vector(job, data), None, None
    return None, None, None


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


#: MPyC's steps that receive messages from a peer, by the name the tally gives them (``trust.received``)
RECEIVING_STEPS = {"_distribute": "input", "_reshare": "reshare", "output": "open", "transfer": "sync"}


def _tally_receipts(mpc: Any) -> dict[str, dict[str, int]]:
    """Count every message this process receives, by step (``RECEIVING_STEPS``) and peer index, and the peers whose
    pseudorandom secret-sharing keys it receives at start-up (step "keys"): MPyC's own receiving calls, wrapped."""
    tally: dict[str, dict[str, int]] = {}

    def count(step: str, peer: int) -> None:
        tally.setdefault(step, {}).setdefault(str(peer), 0)
        tally[step][str(peer)] += 1

    receive, keys = mpc._receive_message, mpc._prss_keys_from_peer

    def receive_counted(peer_pid: int) -> Any:
        frame: Any = sys._getframe(1)
        step = None
        while frame is not None and step is None:  # the MPyC step that asked (a comprehension inside it is skipped)
            step = RECEIVING_STEPS.get(frame.f_code.co_name)
            frame = frame.f_back if step is None and frame.f_code.co_name.startswith("<") else None
        count(step or sys._getframe(1).f_code.co_name, peer_pid)
        return receive(peer_pid)

    def keys_counted(peer_pid: int, data: Any = None) -> Any:
        if data is not None:
            count("keys", peer_pid)
        return keys(peer_pid, data)

    mpc._receive_message, mpc._prss_keys_from_peer = receive_counted, keys_counted
    return tally


async def _aggregate(mpc: Any, job: AggregationJob, vector: np.ndarray | None, record_view: bool, status: str | None,
                     block: np.ndarray | None = None, label: np.ndarray | None = None) -> tuple[np.ndarray, dict[str, np.ndarray], int]:
    tally = _tally_receipts(mpc) if record_view else {}
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
    if job.products is not None:
        cross, blocks = _cross_products(mpc, secint, job, block, label)
        total = total + cross
        if record_view:  # what this party holds of the other data parties' blocks and the label: their Shamir shares
            for name, shared in blocks.items():
                if (name[len("label:"):] if name.startswith("label:") else name) != job.parties[mpc.pid]:
                    received = await mpc.gather(shared.share)
                    key = name if name.startswith("label:") else f"block:{name}"
                    view[key] = np.array([int(v) for v in np.asarray(received.value).ravel()], dtype=object)
        _status(status, "products")
    opened = await mpc.output(total)
    _status(status, "opened")
    sent = sum(peer.protocol.nbytes_sent for peer in mpc.parties if peer.protocol is not None and peer.pid != mpc.pid)
    await mpc.shutdown()
    for step, peers in tally.items():  # the receipts, by peer name: what this process received, message by message
        view[f"receipts/{step}"] = np.array([f"{job.parties[int(i)]}={n}" for i, n in sorted(peers.items())], dtype=object)
    return np.asarray(opened, dtype=np.int64).ravel(), view, int(sent)


def _cross_products(mpc: Any, secint: Any, job: AggregationJob, block: np.ndarray | None,
                    label: np.ndarray | None) -> tuple[Any, dict[str, Any]]:
    """The secure Gram's cross-blocks (``crossproducts``): every data party inputs its integer block (the label
    holder also its label), the products of blocks held by different parties are computed on the shares (MPyC's
    matrix product reshares once per output entry), and public 0/1 matrices place them in the released vector."""
    products = job.products
    assert products is not None
    N = products.rows
    shared = {}
    for name, width in products.blocks:
        own = block if job.index(name) == mpc.pid else None
        shared[name] = mpc.input(secint.array(own if own is not None else np.zeros((N, width), dtype=np.int64)),
                                 senders=job.index(name))
    holder = job.index(products.label)
    y = mpc.input(secint.array(label if label is not None and holder == mpc.pid else np.zeros(N, dtype=np.int64)), senders=holder)
    total = None
    for node, a, b in products.products():
        product = shared[a].T @ (shared[b] if node == "xtx" else y)
        placed = products.scatter(node, a, b) @ product.reshape(-1)
        total = placed if total is None else total + placed
    return (total if total is not None else secint.array(np.zeros(job.dimension, dtype=np.int64))), {**shared, f"label:{products.label}": y}


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
    holds_data = name in job.inputs if job.products is None else name in job.products.parties
    if holds_data and args.input is None:
        print(f"party {name!r} contributes to this computation: give --input", file=sys.stderr)
        return 2
    try:
        data: dict[str, Any] = {}
        if args.input is not None:
            with np.load(args.input) as stored:
                data = {k: stored[k] for k in stored.files}
        vector, block, label = party_input(job, name, data)
    except ShareRefused as exc:
        _status(args.status, "refused", why=str(exc))
        print(f"party {name!r} refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    os.environ.setdefault("MPYC_NOUVLOOP", "1")
    _loopback_event_loop()
    sys.argv = [sys.argv[0], *mpc_argv, "--no-log"]
    from mpyc.runtime import mpc  # parses sys.argv: -M, -I, -T, -P

    opened, view, sent = mpc.run(_aggregate(mpc, job, vector, args.record_view, args.status, block, label))
    arrays = {"aggregate": opened, "bytes_sent": np.array(sent, dtype=np.int64), **{f"view/{k}": v.astype(str) for k, v in view.items()}}
    tmp = args.output + ".tmp.npz"
    np.savez(tmp, **arrays)
    os.replace(tmp, args.output)
    _status(args.status, "done")
    watchdog.cancel()
    return 0


if __name__ == "__main__":
    sys.exit(main())
