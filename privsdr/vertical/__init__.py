"""Vertically partitioned data: parties hold different columns of the same people (issue 13).

The party engine (``privsdr.parties``: layout, messages, engine, the party process) runs any protocol whose every message is a
plan node's release or post-processing of one; DP-BCD (``dpbcd``) is the first protocol on it, PRIDE (``pride``, issue 14) the second.
``SecureVerticalRegression`` (``secure_regression``, issue 23) does not use the party layer: the parties compute
X^T X and X^T y inside a secure computation (``privsdr.secure``) and the model is post-processing of that release.
"""
from typing import TYPE_CHECKING

from .._lazy import lazy_getattr
from ..parties.engine import (
    Action,
    ActionResult,
    Outgoing,
    ProtocolAbort,
    ProtocolAborted,
    ProtocolRun,
    Stage,
    VerticalProtocol,
    check_ledger_reuse,
    commit_parts,
    format_revealed,
    per_record_line,
    revealed_entry,
    run_protocol,
    split_plan,
)
from ..parties.layout import Layout, Party, PartyInfo, check_parties
from ..parties.messages import Mailbox, PartyMessage, message_id
from ..parties.party_process import PartyOutcome, run_party
from .dpbcd import DPBCDConfig, DPBCDProtocol, DPBCDResult
from .dpbcd_steps import DegenerateResidualError
from .pride import LargeDeltaWarning, PRIDEConfig, PRIDEProtocol, PRIDEResult

_ESTIMATORS = {"DPBCDRegression": ".estimator", "PRIDERegressor": ".pride_estimator", "SecureVerticalRegression": ".secure_regression",
               "SecureVerticalSIR": ".secure_moments", "SecureVerticalMeanCovariance": ".secure_moments", "posterior_bound": ".audit",
               "zero_row_audit": ".audit", "zero_row_pair": ".audit"}


# the scikit-learn estimators and the audits are loaded on first use: a party process (``privsdr vertical party``)
# runs the protocol without importing scikit-learn or scipy.stats
__getattr__ = lazy_getattr(__name__, _ESTIMATORS, globals())


if TYPE_CHECKING:
    from .audit import posterior_bound, zero_row_audit, zero_row_pair
    from .estimator import DPBCDRegression
    from .pride_estimator import PRIDERegressor
    from .secure_moments import SecureVerticalMeanCovariance, SecureVerticalSIR
    from .secure_regression import SecureVerticalRegression

__all__ = [
    "Action", "ActionResult", "check_ledger_reuse", "check_parties", "commit_parts", "DegenerateResidualError", "DPBCDConfig", "DPBCDProtocol",
    "DPBCDRegression", "DPBCDResult", "format_revealed", "LargeDeltaWarning", "Layout", "Mailbox",
    "message_id", "Outgoing", "Party", "PartyInfo", "PartyMessage", "PartyOutcome", "per_record_line",
    "posterior_bound", "PRIDEConfig", "PRIDEProtocol", "PRIDERegressor", "PRIDEResult", "ProtocolAbort",
    "ProtocolAborted", "ProtocolRun", "revealed_entry", "run_party", "run_protocol", "SecureVerticalMeanCovariance", "SecureVerticalRegression", "SecureVerticalSIR", "split_plan", "Stage", "VerticalProtocol",
    "zero_row_audit", "zero_row_pair",
]
