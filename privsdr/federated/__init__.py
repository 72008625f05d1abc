"""Multi-party protocols: federated SIR (clients upload private statistics, a server merges them)."""
from .client import client_message, client_plan, screening_message
from .estimator import FederatedSIR
from .execution import client_seeds, run_clients
from .protocol import PROTOCOL, PROTOCOL_VERSION, ClientMessage, FSIRConfig, check_compatible
from .server import FSIRResult, majority_vote, merge, privacy_summary

__all__ = [
    "check_compatible", "client_message", "client_plan", "client_seeds", "ClientMessage", "FederatedSIR",
    "FSIRConfig", "FSIRResult", "majority_vote", "merge", "privacy_summary", "PROTOCOL", "PROTOCOL_VERSION",
    "run_clients", "screening_message",
]
