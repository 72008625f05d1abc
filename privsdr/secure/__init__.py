"""Secure aggregation on MPyC: several parties' sufficient statistics summed inside a secure computation, with the
noise added once, as the sum of the parties' own discrete Gaussian shares (distributed DP).

* ``job``: the public description of one aggregation (its releases, grids, share variances, field size) and the
  pure function that sizes the field so that no sum can wrap around;
* ``party``: the MPyC program every party runs (``python -m privsdr.secure.party``); the only module that imports
  ``mpyc.runtime``;
* ``launch``: starts one process per party on 127.0.0.1, bounds their time, ends exactly those processes;
* ``aggregate``: what a protocol calls: charge the nodes (write-ahead), run the parties, accept the opened sums;
* ``trust``: the trust model every report states.

What is secret-shared: each party's rounded statistic plus its noise share. What each party sees: Shamir shares
(uniformly random field elements) of the other parties' vectors, and the opened noisy sum. What is opened: the sum
only. The noise of the sum is priced by ``DistributedDiscreteGaussianEvent`` (Kairouz, Liu & Steinke, ICML 2021),
with a collusion threshold t: the shares of the parties outside any coalition of t meet the calibration.
"""
from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

_NAMES = {"SecureAggregationError": ".aggregate", "secure_release": ".aggregate", "secure_gram_release": ".aggregate",
          "AggregationJob": ".job", "NodeJob": ".job", "field_bits": ".job", "trust_model": ".trust"}


# names are loaded on first use: a party process (``python -m privsdr.secure.party``) imports the job and the sampler
# only, not the plan and release machinery of ``aggregate``
__getattr__ = lazy_getattr(__name__, _NAMES, globals())


if TYPE_CHECKING:
    from .aggregate import SecureAggregationError, secure_gram_release, secure_release
    from .job import AggregationJob, NodeJob, field_bits
    from .trust import trust_model

__all__ = ["AggregationJob", "NodeJob", "SecureAggregationError", "field_bits", "secure_gram_release", "secure_release", "trust_model"]
