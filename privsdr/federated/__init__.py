"""Multi-party protocols: federated SIR (clients upload private statistics, a server merges them)."""
from typing import TYPE_CHECKING, Any

from ..execution import client_seeds, run_clients
from .client import client_message, client_plan, screening_message
from .protocol import PROTOCOL, PROTOCOL_VERSION, ClientMessage, FSIRConfig, check_compatible
from .server import FSIRResult, majority_vote, merge, privacy_summary

if TYPE_CHECKING:
    from .estimator import FederatedSIR
    from .secure_sites import SecureSites


def __getattr__(name: str) -> Any:
    """``FederatedSIR`` (a scikit-learn estimator) is loaded on first use: clients and servers do not need it."""
    if name == "FederatedSIR":
        from .estimator import FederatedSIR

        globals()[name] = FederatedSIR
        return FederatedSIR
    if name == "SecureSites":  # loads the secure engine's launcher: on first use
        from .secure_sites import SecureSites

        globals()[name] = SecureSites
        return SecureSites
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "check_compatible", "client_message", "client_plan", "client_seeds", "ClientMessage", "FederatedSIR",
    "FSIRConfig", "FSIRResult", "majority_vote", "merge", "privacy_summary", "PROTOCOL", "PROTOCOL_VERSION",
    "run_clients", "screening_message", "SecureSites",
]
