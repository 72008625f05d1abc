"""Vertically partitioned data: parties hold different columns of the same people (issue 13).

The party layer (``layout``, ``messages``, ``engine``) runs any protocol whose every message is a
plan node's release or post-processing of one; DP-BCD (``dpbcd``) is the first protocol on it, PRIDE (``pride``, issue 14) the second.
"""
from .dpbcd import DPBCDConfig, DPBCDProtocol, DPBCDResult
from .dpbcd_steps import DegenerateResidualError
from .estimator import DPBCDRegression
from .pride import LargeDeltaWarning, PRIDEConfig, PRIDEProtocol, PRIDEResult
from .pride_estimator import PRIDERegressor
from .engine import (
    Action,
    ActionResult,
    Outgoing,
    ProtocolAbort,
    ProtocolAborted,
    ProtocolRun,
    Stage,
    VerticalProtocol,
    format_revealed,
    per_record_line,
    run_protocol,
    split_plan,
)
from .layout import Layout, Party, PartyInfo, check_parties
from .messages import Mailbox, PartyMessage, message_id
from .audit import posterior_bound, zero_row_audit, zero_row_pair
from .party_process import PartyOutcome, run_party

__all__ = [name for name in dir() if not name.startswith("_")]
