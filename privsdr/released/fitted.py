"""What an estimator's post-processing of a ``Released`` gives it: one shape for every consumer.

Every sufficient-statistics estimator has one consumer, ``<estimator>_from_released(released, public parameters)``
(e.g. ``mean_covariance_from_released``, ``adassp_from_released``): a pure function of the released arrays, their
public noise sds (``Released.scales``) and public parameters, returning a ``Fitted``: the learned attributes, the
noise diagnostics its privacy report carries and the warnings the fit raises. It reads no plan, no ``Run``, no row:
the fit produces a ``Released`` (``released.from_run``) and calls it, and any other producer (secure horizontal or
vertical, a stored release) gets the same estimator by calling it on its own ``Released``. ``Fitted.apply`` sets
the attributes, attaches the diagnostics to the run's report and raises the warnings (post-processing: no cost).
"""
from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import attrs


def with_noise_message(report: Any, message: str, message_key: str = "noise", **values: Any) -> Any:
    """The report with a noise diagnostic attached (post-processing: no cost): ``message`` as its ``message_key``
    message (shown in every rendering) and ``values`` beside the other diagnostics."""
    messages = {**report.diagnostics.get("messages", {}), message_key: message}
    return attrs.evolve(report, diagnostics={**report.diagnostics, **values, "messages": messages})


def _mapping(value: Mapping[str, Any]) -> dict[str, Any]:
    return dict(value)


@attrs.frozen(eq=False)
class Diagnostic:
    """A message the report shows under ``key`` with the values stored beside the report's other diagnostics."""

    key: str
    message: str
    values: Mapping[str, Any] = attrs.field(factory=dict, converter=_mapping)


@attrs.frozen(eq=False)
class Fitted:
    """The fitted state a consumer computes from a ``Released`` (module docstring)."""

    attributes: Mapping[str, Any] = attrs.field(converter=_mapping)  #: learned attribute name (trailing _) -> value
    diagnostics: Sequence[Diagnostic] = ()  #: attached to the report in this order
    warnings: Sequence[tuple[type[Warning], str]] = ()  #: raised by ``apply`` in this order

    def __getitem__(self, name: str) -> Any:
        return self.attributes[name]

    def apply(self, estimator: Any, report: Any = None, stacklevel: int = 3) -> Any:
        """Set the attributes on ``estimator``; with ``report``, return it with the diagnostics attached (else None);
        raise the warnings."""
        for name, value in self.attributes.items():
            setattr(estimator, name, value)
        if report is not None:
            for d in self.diagnostics:
                report = with_noise_message(report, d.message, d.key, **d.values)
        for category, message in self.warnings:
            warnings.warn(message, category, stacklevel=stacklevel)
        return report
