"""The trust model of a secure aggregation, as every report states it (JSON, Markdown, HTML).

What each party sees is derived from the job (``received``: the messages its process receives, by MPyC step and
peer) and written out by ``describe``; ``tests/test_secure_views.py`` records the messages the real party processes
receive (``party --record-view``) and checks that ``describe`` of the recording is the report's sentence.
"""
from __future__ import annotations

import json
import math
from typing import Any

from .job import AggregationJob

SHARES = "Shamir shares (uniformly random field elements)"


def received(job: AggregationJob, party: str) -> dict[str, Any]:
    """What ``party``'s process receives, by MPyC step: ``keys`` (the peers whose pseudorandom secret-sharing keys
    reach it at start-up), ``input`` (peer -> the objects it secret-shares: ``vector`` and the keys of its column groups, ``block``,
    ``label``, ...),
    ``reshare`` (the peers that reshare their products to it), ``open`` (the t peers whose shares of the total it
    uses to open it), ``sync`` (the peers of the agreement's exchange of public jobs, digests and readiness, and of MPyC's start and
    shutdown barriers, no data)."""
    i, m, t = job.index(party), len(job.parties), job.threshold
    peers = [p for p in job.parties if p != party]
    inputs: dict[str, list[str]] = {}
    for peer in peers:
        objects = ["vector"] if peer in job.inputs else []
        if job.products is not None:
            objects += [g.key for g in job.products.owned(peer)]
        if objects:
            inputs[peer] = objects
    reshare = peers if job.products is not None and job.products.pairs() else []
    return {"keys": list(job.parties[:i]), "input": inputs, "reshare": reshare,
            "open": [job.parties[(i - t + j) % m] for j in range(t)], "sync": peers}


def describe(job: AggregationJob, party: str, view: dict[str, Any]) -> str:
    """The sentence "what ``party`` sees" for what its process receives (``received`` or a recording of it)."""
    products = job.products
    if products is None:
        own = "its own statistics and noise share" if party in job.inputs else "nothing of its own (it holds no data and contributes nothing)"
    else:
        groups = products.owned(party)
        own = ("its own " + ", the ".join(g.description for g in groups) + " and noise share" if groups
               else "nothing of its own (it holds no data and adds a noise share)")
    holds = products.parties if products is not None else job.inputs

    def kind(peer: str, obj: str) -> str:
        if obj == "vector":
            what = "its rounded statistics" if products is None else "its own products"
            return f"vector ({what} plus its noise share)" if peer in holds else "vector (its noise share alone)"
        assert products is not None
        return "rounded " + next(g.description for g in products.owned(peer) if g.key == obj)

    parts = [own]
    shared = [f"{peer}'s " + " and ".join(kind(peer, k) for k in objects) for peer, objects in view["input"].items()]
    if shared:
        parts.append(f"{SHARES} of " + "; of ".join(shared))
    if view["reshare"]:
        parts.append(f"{SHARES} of the partial products that {', '.join(view['reshare'])} reshare while the cross-products are "
                     "computed")
    if view["keys"]:
        parts.append(f"the pseudorandom secret-sharing keys of {', '.join(view['keys'])} (random, independent of the data)")
    opened = f"the noisy {' and '.join(b.description or b.name for b in products.blocks)}" if products is not None else "the noisy sums"
    parts.append(f"the shares of {', '.join(view['open'])} that open {opened}, and the opened values")
    return ("; ".join(parts) + ". Nothing else reaches its process but, before anything is charged, every other party's "
            "public job, its digest and whether it is ready (the agreement), after the charge whether every other party charged its "
            "ledger (the charged round), and barrier messages, which carry no data")


TLS_CHANNELS = "authenticated, encrypted channels (mutual TLS, certificates of one CA)"
PLAINTEXT_CHANNELS = "plaintext TCP channels, neither encrypted nor authenticated (asked for explicitly)"


def channels(job: AggregationJob) -> str:
    """The sentence on the channels, from what the job gives the party processes (``party.mpc_arguments``: ``--ssl``
    exactly when ``job.tls``; each party listens on its own address of ``job.addresses`` only)."""
    where = "each party listens on its own configured address only" + (
        (" (every address on this machine's loopback interface)" if job.loopback else " (network addresses)") if job.addresses else "")
    if job.tls:
        return (f"channels: {TLS_CHANNELS}: every connection between two parties is TLS (MPyC's --ssl), and each side checks "
                "that the other's certificate is signed by the run's CA and names the party it claims to be (MPyC party i); "
                f"{where}. The guarantee assumes that each party's key stays with that party and the CA's key signs no other "
                "certificate for a party's name (whoever holds a party's key can be that party)")
    scope = "on this machine " if job.addresses and job.loopback else ""
    return (f"channels: {PLAINTEXT_CHANNELS}: MPyC takes a peer's party number from the first message on a connection, so any "
            f"process {scope}that reaches a party's address first can claim to be another party, and anyone who can read the "
            f"traffic reads every share and message; {where}. The guarantee assumes that no one does either")


def trust_model(job: AggregationJob, server: str | None = None, budget: Any = None) -> dict[str, Any]:
    """Who must not collude and what each party sees, for the report's ``trust_model`` section. ``budget``: the
    run's (epsilon, delta), for the secure Gram's statement on one party's own values (group privacy)."""
    m, t = len(job.parties), job.threshold
    honest = len(job.inputs) - t
    viewers = {name: describe(job, name, received(job, name)) for name in job.parties}
    setting = "secure aggregation on MPyC: Shamir secret sharing over a prime field (BGW-style, honest majority)"
    deviation = ("semi-honest parties: every party runs the protocol as written. The computation is additions of shares and one "
                 "opening, so whatever a deviating party inputs or sends changes the opened value by an amount that does not depend "
                 "on the other parties' data: it can spoil the result's accuracy, not the other parties' privacy")
    extra: dict[str, Any] = {}
    if job.products is not None:
        setting = ("secure Gram on MPyC: every data party secret-shares its clipped, rounded columns (Shamir, prime field, "
                   "BGW-style, honest majority); the cross-products are computed on the shares and only the noisy blocks "
                   f"{', '.join(b.description or b.name for b in job.products.blocks)} are opened; rows are aligned by a public row order, so every party knows N and which row is whose")
        deviation = ("semi-honest parties: every party runs the protocol as written, and the other parties' privacy depends on it. "
                     "Nothing inside the secure computation checks what a data party inputs: a data party that inputs a block whose "
                     "rows exceed its public bound C_i by a factor r (unclipped columns, say) multiplies every other party's row by "
                     "up to r in the opened cross-products, and the noise, calibrated for rows of norm C_i, then gives the other "
                     "parties r times the privacy loss (a mu-GDP release becomes r mu-GDP), with r as large as the field allows; "
                     "the label holder's label or slice indicators likewise. A row-norm check inside the computation would take about N (w + 1) secure "
                     "comparisons, hundreds of times the secure Gram's own time (benchmarks/bench_secure_rowcheck.py), and is not "
                     "made. The helper inputs only a noise share: a deviating helper's input changes the opened value by an amount "
                     "that does not depend on the data")
        relation = json.loads(job.public or "{}").get("plan", {}).get("relation")
        if budget is not None and math.isfinite(budget.epsilon) and relation == "replace_one":
            extra["own_values"] = (f"one person's whole row, and a data party's own values in one row (a replacement of that row, N "
                                   f"public), are protected at (epsilon, delta) = ({budget.epsilon:.4g}, {budget.delta:.3g}) (replace-one)")
        elif budget is not None and math.isfinite(budget.epsilon):
            e, d = budget.epsilon, budget.delta
            extra["own_values"] = (f"one person's whole row is protected at (epsilon, delta) = ({e:.4g}, {d:.3g}) (add/remove). A data "
                                   "party's own values in one row (its columns, or the label), the rest of the row unchanged, are a "
                                   "replacement of that row, a removal and an addition: against the other parties and every reader "
                                   f"of the release they are protected at (2 epsilon, (1 + e^epsilon) delta) = ({2 * e:.4g}, "
                                   f"{(1 + math.exp(e)) * d:.3g}) by group privacy (Dwork & Roth 2014, Thm 2.2)")
    return {
        "setting": setting,
        "parties": list(job.parties),
        "contributors": list(job.inputs),
        "server": server,
        "collusion_threshold": t,
        "assumptions": [
            deviation,
            f"at most t = {t} of the {m} parties collude (t < m/2: an honest majority)",
            channels(job),
        ],
        "what_each_party_sees": viewers,
        "agreement": ("before anything was charged, every party sent every other party the record and digest of its public job "
                      "(budget, accountant, relation, bounds, grids, noise shares, layout, parties, t, field size) and whether it "
                      "was ready, over MPyC's channels (public values); the run went on only because every party held the same "
                      "job and was ready, so every party calibrated and certified the same release; after the charge, every party "
                      "told every other whether it had charged its ledger, and no noise share was drawn until every party had"),
        "opened": [n.name for n in job.nodes],
        "noise": (f"each of the {len(job.inputs)} contributors adds its own exact discrete Gaussian share; the shares of the "
                  f"{honest} contributors outside any coalition of {t} alone meet the calibration (Kairouz, Liu & Steinke, ICML 2021, "
                  f"Prop. 14), so the opened noise, all {len(job.inputs)} shares, has sqrt({len(job.inputs)}/{honest}) = "
                  f"{math.sqrt(len(job.inputs) / honest):.3f} times the calibrated sd (the price of tolerating {t} colluders)"),
        "field_bits": job.bits,
        **extra,
        "status": f"secure aggregation, <= {t} colluding parties" + ("" if job.tls else ", plaintext channels"),
    }
