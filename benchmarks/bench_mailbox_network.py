"""DP-BCD's two parties through the folder mailbox, over mutual TLS and over plaintext TCP (issue 36 item 1): N rows x
10 columns (5 per party), certified, epsilon 1, five rounds; each party in a thread of this process, the network
parties on 127.0.0.2 and 127.0.0.3. One run of each, in that order.

    python benchmarks/bench_mailbox_network.py [--rows 100000]

Prints the wall time of each run (connecting, TLS handshakes and every message included; the folder polls every
0.2 s and writes each message to a file) and the payload bytes the parties sent (the same for the three). A
measurement, not a test.
"""
from __future__ import annotations

import argparse
import tempfile
import threading
import time
from typing import Any

from privsdr import Budget
from privsdr.datasets import dpbcd_synthetic
from privsdr.network.addresses import free_ports
from privsdr.network.certificates import make_keys
from privsdr.parties.transport import NetworkMailbox, message_cap
from privsdr.vertical import DPBCDConfig, DPBCDProtocol, Layout, Party, PartyInfo, run_party


def run(protocol: Any, parties: dict[str, Party], layout: Layout, boxes: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    out: dict[str, Any] = {}

    def one(name: str) -> None:
        out[name] = run_party(protocol, parties[name], layout, Budget(1.0, 1e-6), boxes[name], random_state=1)

    start = time.perf_counter()
    threads = [threading.Thread(target=one, args=(name,)) for name in boxes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    d = dpbcd_synthetic(args.rows, 10, seed=1)
    layout = Layout(args.rows, (PartyInfo("alice", 5, True), PartyInfo("bob", 5)))
    parties = {"alice": Party("alice", d.blocks[0], d.y), "bob": Party("bob", d.blocks[1])}
    protocol = DPBCDProtocol(DPBCDConfig(mode="certified", row_bound=8.0, label_bound=60.0, coef_bound=20.0))
    with tempfile.TemporaryDirectory() as tmp:
        keys = make_keys(f"{tmp}/keys", ["alice", "bob"])
        for label in ("folder", "tls", "plaintext"):
            if label == "folder":
                boxes: dict[str, Any] = {name: f"{tmp}/box" for name in parties}
            else:
                where = {"alice": f"127.0.0.2:{free_ports(1, '127.0.0.2')[0]}", "bob": f"127.0.0.3:{free_ports(1, '127.0.0.3')[0]}"}
                boxes = {name: NetworkMailbox(name, where, "bench", certificates=keys[name], tls=label == "tls", timeout=120,
                                              max_message=message_cap(layout)) for name in where}
            seconds, out = run(protocol, parties, layout, boxes)
            sent = sum(m.payload_bytes for o in out.values() for m in o.sent)
            print(f"{label:<10} {seconds:7.2f} s   {sent} payload bytes")


if __name__ == "__main__":
    main()
