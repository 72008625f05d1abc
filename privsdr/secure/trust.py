"""The trust model of a secure aggregation, as every report states it (JSON, Markdown, HTML)."""
from __future__ import annotations

from typing import Any

from .job import AggregationJob


def trust_model(job: AggregationJob, server: str | None = None) -> dict[str, Any]:
    """Who must not collude and what each party sees, for the report's ``trust_model`` section."""
    m, t = len(job.parties), job.threshold
    honest = len(job.inputs) - t
    viewers = {name: ("the opened noisy sums only" if name not in job.inputs else
                      "its own statistics, Shamir shares (uniformly random field elements) of the other contributors' vectors, "
                      "and the opened noisy sums") for name in job.parties}
    setting = "secure aggregation on MPyC: Shamir secret sharing over a prime field (BGW-style, honest majority)"
    if job.products is not None:
        data = set(job.products.parties)
        viewers = {name: (f"its own columns{' and the label' if name == job.products.label else ''}, Shamir shares (uniformly "
                          "random field elements) of the other parties' rounded columns and noise vectors, and the opened noisy "
                          "Gram and X^T y" if name in data else
                          "Shamir shares (uniformly random field elements) of every party's rounded columns and noise vectors, and "
                          "the opened noisy Gram and X^T y; it holds no data and adds a noise share")
                   for name in job.parties}
        setting = ("secure Gram on MPyC: every data party secret-shares its clipped, rounded columns (Shamir, prime field, "
                   "BGW-style, honest majority); the cross-products are computed on the shares and only the noisy X^T X and "
                   "X^T y are opened; rows are aligned by a public row order, so every party knows N and which row is whose")
    return {
        "setting": setting,
        "parties": list(job.parties),
        "contributors": list(job.inputs),
        "server": server,
        "collusion_threshold": t,
        "assumptions": [
            "semi-honest parties: every party runs the protocol as written (a party that deviates can spoil the result's "
            "accuracy, not the other parties' privacy: the opened value is the honest parties' noisy sum plus values it chose "
            "without seeing them)",
            f"at most t = {t} of the {m} parties collude (t < m/2: an honest majority)",
            "private, authenticated channels between the parties (here TCP on 127.0.0.1)",
        ],
        "what_each_party_sees": viewers,
        "agreement": ("before anything was charged, every party sent every other party the record and digest of its public job "
                      "(budget, accountant, relation, bounds, grids, noise shares, layout, parties, t, field size) and whether it "
                      "was ready, over MPyC's channels (public values); the run went on only because every party held the same "
                      "job and was ready, so every party calibrated and certified the same release"),
        "opened": [n.name for n in job.nodes],
        "noise": (f"each of the {len(job.inputs)} contributors adds its own exact discrete Gaussian share; the shares of the "
                  f"{honest} contributors outside any coalition of {t} alone meet the calibration (Kairouz, Liu & Steinke, ICML 2021, "
                  "Prop. 14)"),
        "field_bits": job.bits,
        "status": f"secure aggregation, <= {t} colluding parties",
    }
