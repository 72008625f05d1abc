"""Secure horizontal fits: an estimator's central release as the secure sum of K sites' block sums.

``SecureSites(estimator, colluders=t).fit([(X_1, y_1), ..., (X_K, y_K)])`` fits AdaSSP's certified default, DPPLS
S2 or ``DPMeanCovariance`` on the N = sum n_k rows of K sites that never pool them. The estimator declares its blocks
(``released.sites.SiteBlocks``: its own plan, its per-site statistics, public entry bounds and its post-processing);
this module is the one producer for all of them:

1. every site's rows are checked (finite, the same width, at most ``max_rows`` rows when n is not public) and the
   estimator's plan is turned into distributed releases (``released.sites.distributed_plan``: the same sensitivities,
   K noise shares of which t may collude), calibrated for all N rows at once;
2. each site computes its local block sums (e.g. count, sum x, sum y, X^T X, X^T y of its clipped rows);
3. ``privsdr.secure.secure_release`` adds them inside a secure computation (MPyC: one process per site plus a server
   that holds no data), each site adding its own discrete Gaussian share; only the noisy sums are opened;
4. ``released.from_run`` makes the ``Released`` and the estimator's own post-processing fits on it (AdaSSP:
   ``centred_solution`` and its fallback towards the DP mean; DPPLS: ``ssp_postprocess``; mean-covariance: its
   projections). The report carries the trust model of what each process received.

With the noise off the fit equals the estimator's fit on the pooled rows (up to the public grid's rounding). The
noise is the central release's at N rows times sqrt(K / (K - t)) for tolerating t colluders.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._validation import check_matrix, check_vector
from ..errors import ValidationError
from ..mechanisms.collusion import honest_majority
from ..plan import Run
from ..released import from_run
from ..released.sites import SiteBlocks, distributed_plan, site_bounds
from ..secure import secure_release
from ..secure.aggregate import agreed_parties, release_job

SERVER = "server"
#: the default public cap on one site's rows (it sizes the secure integers when n is not public)
MAX_ROWS = 2**24
SOURCE = "secure sum over sites"


class SecureSites:
    """Fit ``estimator`` on the rows of several sites by secure aggregation of its declared blocks (module docstring).

    Parameters
    ----------
    estimator: an estimator with ``_site_blocks`` (``AdaSSPRegression`` with its certified default, ``DPPLS`` in
        mode ``"certified"``, ``DPMeanCovariance``); its budget, ledger and bounds are used as given.
    colluders: t, the number of parties (sites and server) that may collude: t < (K + 1) / 2; the noise shares of
        the K - t sites outside any coalition meet the calibration.
    timeout: seconds a party process waits for the others.
    max_rows: a public cap on one site's rows (used when n is not public: it bounds a site's sums for the field).
    addresses: one host:port per party, the server first (default: free ports on 127.0.0.1).
    tls, certificates: the channels (``privsdr.secure``: mutual TLS unless plaintext is asked for).

    ``fit(sites)`` returns the fitted estimator, with ``released_`` (the opened sums) and ``privacy_report_`` (its
    trust model included).
    """

    def __init__(self, estimator: Any, *, colluders: int = 1, timeout: float = 120.0, max_rows: int = MAX_ROWS,
                 addresses: Sequence[str] | None = None, tls: bool = True, certificates: Any = None) -> None:
        self.estimator = estimator
        self.colluders = colluders
        self.timeout = timeout
        self.max_rows = max_rows
        self.addresses = addresses
        self.tls = tls
        self.certificates = certificates

    def _check(self, sites: Any) -> list[tuple[np.ndarray, np.ndarray | None]]:
        if not hasattr(self.estimator, "_site_blocks"):
            raise ValidationError(f"{type(self.estimator).__name__} declares no blocks for a secure fit over sites (supported: "
                                  "AdaSSPRegression, DPPLS, DPMeanCovariance)")
        t = self.colluders
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1:
            raise ValidationError(f"colluders (the collusion threshold t) must be an integer >= 1, got {t!r}")
        if isinstance(self.max_rows, bool) or not isinstance(self.max_rows, (int, np.integer)) or self.max_rows < 1:
            raise ValidationError(f"max_rows must be a positive integer, got {self.max_rows!r}")
        if isinstance(sites, (str, bytes)) or not isinstance(sites, Sequence) or len(sites) < 2:
            raise ValidationError("sites must be a list of at least 2 (X, y) pairs (one per site)")
        m = len(sites) + 1  # the sites and the server
        if not honest_majority(m, int(t)):
            raise ValidationError(f"{len(sites)} sites and a server are {m} parties: an honest majority tolerates t < {m / 2:g} "
                                  f"colluders, not {t} (more sites, or a smaller t)")
        checked: list[tuple[np.ndarray, np.ndarray | None]] = []
        for k, site in enumerate(sites):
            if not isinstance(site, (tuple, list)) or len(site) != 2:
                raise ValidationError(f"site {k} must be a pair (X, y) (y None for an estimator without one)")
            X = check_matrix(site[0], f"X of site {k}", min_rows=1)
            y = None if site[1] is None else check_vector(site[1], f"y of site {k}")
            if y is not None and len(y) != X.shape[0]:
                raise ValidationError(f"site {k}: X has {X.shape[0]} rows but y has {len(y)}")
            if checked and X.shape[1] != checked[0][0].shape[1]:
                raise ValidationError(f"site {k} has {X.shape[1]} columns, site 0 has {checked[0][0].shape[1]}: every site holds "
                                      "the same columns")
            checked.append((X, y))
        return checked

    def fit(self, sites: Sequence[tuple[Any, Any]]) -> Any:
        """Fit on the sites' rows (module docstring); everything is checked before anything is charged."""
        checked = self._check(sites)
        K, t, p = len(checked), int(self.colluders), checked[0][0].shape[1]
        N = int(sum(X.shape[0] for X, _ in checked))
        blocks: SiteBlocks = self.estimator._site_blocks(p, N)
        for k, (X, y) in enumerate(checked):
            if blocks.needs_y and y is None:
                raise ValidationError(f"site {k} has no y: {blocks.algorithm} needs one")
            if blocks.per == 1 and X.shape[0] > self.max_rows:
                raise ValidationError(f"site {k} has {X.shape[0]} rows, more than max_rows = {self.max_rows} (the public cap that "
                                      "sizes the secure sums): raise max_rows")
        plan = distributed_plan(blocks.plan, K, t, blocks.shapes)
        calibrated = plan.allocate(blocks.budget, accountant=blocks.ledger.accountant, tight=True)
        names = tuple(calibrated.specs)
        ids = [f"site-{k}" for k in range(K)]
        contributions = {}
        for site, (X, y) in zip(ids, checked, strict=True):
            local = blocks.statistics(X, y)
            contributions[site] = {name: np.asarray(local[name], dtype=float) for name in names}
        notes = [*blocks.notes, f"the {K} sites' block sums were added inside a secure computation (MPyC) and released once for "
                 f"all N rows; each site added its own discrete Gaussian share (distributed DP, <= {t} colluding parties)"]
        bounds = site_bounds(blocks, int(self.max_rows))
        job = release_job(calibrated, names, ids, bounds, parties=[SERVER, *ids], threshold=t, timeout=self.timeout,
                          addresses=self.addresses, tls=self.tls)
        # every party started and agreed on the public job before the run (and its journal) is opened (issue 36)
        session = agreed_parties(job, contributions, certificates=self.certificates)
        try:
            with Run(calibrated, blocks.ledger, random_state=blocks.random_state, data_shape=(N, p),
                     algorithm=f"{blocks.algorithm} (secure sum over {K} sites)", notes=notes) as run:
                secure_release(run, names, contributions, bounds, parties=[SERVER, *ids], threshold=t, timeout=self.timeout,
                               server=SERVER, addresses=list(session.job.addresses), tls=self.tls, session=session, contributors=ids)
        finally:
            session.__exit__(None, None, None)
        public_n = N if calibrated.relation.value == "replace_one" else 0  # n is not public under add/remove
        released = from_run(run, names, n=public_n, source=SOURCE)
        return blocks.finish(released, run.report, calibrated, blocks.ledger)  # its consumer sets released_ (the opened sums)
