"""A linkage party that cannot take part (its identifiers, its CSV or its output refused before anything is sent)
tells the other parties, so that they stop at once naming it instead of at their timeout (issue 36).

``tell_others(exc, config, name, ...)`` connects as the linkage does, sends the refusal (the kind of failure only:
never a row number or an identifier), waits until every peer has closed, and appends to ``exc`` whether the others
were told. The caller then raises ``exc``.
"""
from __future__ import annotations

import ssl
from typing import Any

from ..errors import ValidationError
from .channel import refuse, refused_note


def tell_others(exc: ValidationError, config: Any, name: str, *, server_context: ssl.SSLContext | None = None,
                client_context: ssl.SSLContext | None = None, allow_plaintext: bool = False, timeout: float = 300.0) -> None:
    """Tell every other party of ``config`` (a ``LinkageConfig``) that ``name`` refused its own input, and say so
    in ``exc``'s message. Nothing happens when ``name`` is not one of the parties."""
    if name not in config.names:
        return
    kind = getattr(exc, "kind", "input (its CSV or its output cannot be used)")
    told = refuse(name, config.parties, config.digest(), f"{name} refused its own {kind} before sending anything; nothing was linked",
                  server_context=server_context, client_context=client_context, allow_plaintext=allow_plaintext, timeout=timeout)
    if exc.args and isinstance(exc.args[0], str):
        exc.args = (exc.args[0] + refused_note(told), *exc.args[1:])
