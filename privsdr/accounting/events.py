"""Privacy events: small frozen records of what one noisy release costs.

They mirror dp-accounting's ``DpEvent`` family (GaussianDpEvent, LaplaceDpEvent, ...) but stay
independent of it, so that nothing imports dp-accounting until an RDP/PLD accountant runs
(``to_dp_event`` imports it lazily).

Sensitivities are folded into the noise multiplier (``z = noise scale / sensitivity``), with the
sensitivity computed under the node's own neighbouring relation. The accountants then always use
dp-accounting's ADD_OR_REMOVE_ONE semantics, where a multiplier means "distance 1 between the two
output means" -- which is exactly our declared sensitivity. This sidesteps the REPLACE_ONE
inconsistency between dp-accounting's RDP and PLD accountants (google/differential-privacy#378).
"""
from __future__ import annotations

import math
from typing import Any, ClassVar, TypeAlias

import attrs

from .budget import Cost
from .gaussian import gaussian_epsilon
from .rounding import div_up
from .zcdp import zcdp_epsilon


def _nonneg(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if math.isnan(value) or value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value!r}")


@attrs.frozen
class GaussianEvent:
    """Gaussian noise with ``noise_multiplier = sigma / L2-sensitivity``.

    ``delta`` is the share of delta at which basic/advanced composition converts this event to an
    (eps, delta) pair, using the exact profile (so classical or paper calibrations are charged what
    they really cost, never their nominal epsilon).
    """

    kind: ClassVar[str] = "gaussian"
    noise_multiplier: float = attrs.field(converter=float, validator=_nonneg)
    delta: float = attrs.field(converter=float, validator=_nonneg)

    def basic_cost(self) -> Cost:
        return Cost(gaussian_epsilon(self.noise_multiplier, self.delta), self.delta)

    def to_dp_event(self) -> Any:
        import dp_accounting

        return dp_accounting.GaussianDpEvent(self.noise_multiplier)


@attrs.frozen
class LaplaceEvent:
    """Laplace noise with ``noise_multiplier = scale / L1-sensitivity``: pure eps = 1/z (rounded up)."""

    kind: ClassVar[str] = "laplace"
    noise_multiplier: float = attrs.field(converter=float, validator=_nonneg)

    def basic_cost(self) -> Cost:
        z = self.noise_multiplier
        return Cost(div_up(1.0, z), 0.0)

    def to_dp_event(self) -> Any:
        import dp_accounting

        return dp_accounting.LaplaceDpEvent(self.noise_multiplier)


@attrs.frozen
class DiscreteGaussianEvent:
    """Exact discrete Gaussian noise (``sampler="secure"``), ``noise_multiplier = sigma / Delta2`` on the grid.

    Its guarantee is (1 / 2 z^2)-zCDP (Canonne, Kamath & Steinke 2020, Thm 4; coordinates compose by
    additivity of Renyi divergence), *not* the continuous Gaussian's profile: every accountant reads it
    through that curve (``zcdp_epsilon`` at its ``delta`` share for basic composition; a zCDP curve for RDP).
    """

    kind: ClassVar[str] = "discrete_gaussian"
    noise_multiplier: float = attrs.field(converter=float, validator=_nonneg)
    delta: float = attrs.field(converter=float, validator=_nonneg)

    @property
    def rho(self) -> float:
        z = self.noise_multiplier
        return math.inf if z == 0 else 0.5 / (z * z) * (1.0 + 1e-15)  # rounded up past the one division's error

    def basic_cost(self) -> Cost:
        return Cost(zcdp_epsilon(self.rho, self.delta), self.delta)

    def to_dp_event(self) -> Any:
        import dp_accounting

        return dp_accounting.ZCDpEvent(self.rho)


@attrs.frozen
class DistributedDiscreteGaussianEvent:
    """The sum of ``honest`` independent discrete Gaussian shares N_Z(0, sigma_local^2), one per party that does not
    collude (secure aggregation, ``privsdr.secure``), released on a public grid of ``dimension`` coordinates.

    ``noise_multiplier`` z = sigma_total / Delta2 with sigma_total^2 = honest * sigma_local^2 (grid units, Delta2
    the rounded grid sensitivity). A sum of discrete Gaussians is not a discrete Gaussian; Kairouz, Liu & Steinke
    (ICML 2021, "The Distributed Discrete Gaussian Mechanism for Federated Learning with Secure Aggregation",
    Prop. 14) bound its Renyi divergence at every order alpha by alpha/2 (1/z + sqrt(d) tau)^2 with
    tau = 10 sum_{k=1}^{honest-1} exp(-2 pi^2 sigma_local^2 k / (k+1)): the release is rho-zCDP with
    rho = (1/z + sqrt(d) tau)^2 / 2 (``rho``). For the shares privsdr draws (sigma_local of thousands of grid
    steps) tau underflows to 0 and rho is the continuous Gaussian's 1/(2 z^2); the bound is used as stated.
    """

    kind: ClassVar[str] = "distributed_discrete_gaussian"
    noise_multiplier: float = attrs.field(converter=float, validator=_nonneg)
    tau: float = attrs.field(converter=float, validator=_nonneg)
    dimension: int = attrs.field(converter=int)
    delta: float = attrs.field(converter=float, validator=_nonneg)

    @property
    def rho(self) -> float:
        z = self.noise_multiplier
        if z == 0:
            return math.inf
        return 0.5 * (1.0 / z + math.sqrt(self.dimension) * self.tau) ** 2 * (1.0 + 1e-15)  # rounded up past the float ops

    def basic_cost(self) -> Cost:
        return Cost(zcdp_epsilon(self.rho, self.delta), self.delta)

    def to_dp_event(self) -> Any:
        import dp_accounting

        return dp_accounting.ZCDpEvent(self.rho)


def distributed_tau(sigma_local: float, honest: int) -> float:
    """KLS21's tau = 10 sum_{k=1}^{honest-1} exp(-2 pi^2 sigma_local^2 k / (k + 1)) (sigma_local in grid steps)."""
    return 10.0 * math.fsum(math.exp(-2.0 * math.pi**2 * sigma_local**2 * k / (k + 1)) for k in range(1, max(honest, 1)))


@attrs.frozen
class DiscreteLaplaceEvent:
    """Exact discrete Laplace noise (``sampler="secure"``), ``noise_multiplier = t / Delta1`` on the grid:
    pure eps = 1/z (the ratio of the two mass functions at any integer is at most exp(|shift| / t))."""

    kind: ClassVar[str] = "discrete_laplace"
    noise_multiplier: float = attrs.field(converter=float, validator=_nonneg)

    def basic_cost(self) -> Cost:
        return Cost(div_up(1.0, self.noise_multiplier), 0.0)

    def to_dp_event(self) -> Any:
        # eps-DP implies (eps^2/2)-zCDP (Bun & Steinke 2016, Prop. 1.4); the continuous Laplace's RDP is not used
        import dp_accounting

        return dp_accounting.ZCDpEvent(self.basic_cost().epsilon ** 2 / 2.0)


@attrs.frozen
class PureEvent:
    """A pure eps-DP release with no finer description (e.g. report-noisy-max)."""

    kind: ClassVar[str] = "pure"
    epsilon: float = attrs.field(converter=float, validator=_nonneg)

    def basic_cost(self) -> Cost:
        return Cost(self.epsilon, 0.0)

    def to_dp_event(self) -> Any:
        # eps-DP implies (eps^2/2)-zCDP (Bun & Steinke 2016, Prop. 1.4); RDP accountant only.
        import dp_accounting

        return dp_accounting.ZCDpEvent(self.epsilon**2 / 2.0)


@attrs.frozen
class ApproxEvent:
    """An opaque (eps, delta)-DP release (objective perturbation, a published claim, ...)."""

    kind: ClassVar[str] = "approx"
    epsilon: float = attrs.field(converter=float, validator=_nonneg)
    delta: float = attrs.field(converter=float, validator=_nonneg)

    def basic_cost(self) -> Cost:
        return Cost(self.epsilon, self.delta)

    def to_dp_event(self) -> Any:
        raise NotImplementedError("opaque (eps, delta) events are composed outside RDP")


@attrs.frozen
class NonPrivateEvent:
    """A release without a DP guarantee (status ``none``); excluded from numeric totals."""

    kind: ClassVar[str] = "non_private"

    def basic_cost(self) -> Cost:
        return Cost(math.inf, 1.0)

    def to_dp_event(self) -> Any:
        import dp_accounting

        return dp_accounting.NonPrivateDpEvent()


Event: TypeAlias = (GaussianEvent | LaplaceEvent | DiscreteGaussianEvent | DistributedDiscreteGaussianEvent | DiscreteLaplaceEvent
                    | PureEvent | ApproxEvent | NonPrivateEvent)
EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (GaussianEvent, LaplaceEvent, DiscreteGaussianEvent, DistributedDiscreteGaussianEvent, DiscreteLaplaceEvent, PureEvent,
                ApproxEvent, NonPrivateEvent)
}
#: events whose guarantee is pure eps-DP (delta plays no part)
PURE_EVENTS = (LaplaceEvent, DiscreteLaplaceEvent, PureEvent)
#: events that carry a declared delta share
DELTA_EVENTS = (GaussianEvent, DiscreteGaussianEvent, DistributedDiscreteGaussianEvent, ApproxEvent)


def event_to_dict(event: Event) -> dict[str, Any]:
    return {"kind": event.kind, **attrs.asdict(event)}


def event_from_dict(data: dict[str, Any]) -> Event:
    data = dict(data)
    cls = EVENT_TYPES[data.pop("kind")]
    return cls(**data)
