"""The collusion thresholds a secure computation tolerates (its own module: a party process checks its job with it
and imports nothing of the accounting)."""
from __future__ import annotations


def honest_majority(parties: int, colluders: int) -> bool:
    """The collusion thresholds the secure computation tolerates: 1 <= t < m / 2 of its m parties (Shamir secret
    sharing with degree-t polynomials, multiplied by BGW, needs 2t < m: Ben-Or, Goldwasser & Wigderson, STOC 1988;
    MPyC's default t = (m - 1) // 2). The one place this rule is written."""
    return 1 <= colluders and 2 * colluders < parties
