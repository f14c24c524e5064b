"""Joins rooms that may not import each other, from the top room that may import them all.

The online off-policy learner (``learner/offpolicy/remote.py``) pushes weights to the policy
server, but ``learner`` may not import ``policy_server`` (imports only point down; the learner
must not depend on the serving package's internals). The CLI, which imports both, plugs the
server's own push client into the learner's ``PUSH_CLIENTS`` registry before a run starts.
"""

from __future__ import annotations

from typing import Any


def websocket_pusher(url: str, token_file: str, timeout_s: float) -> Any:
    """A started :class:`policy_server.push.BackgroundPusher` for ``url`` (token from the file
    or ``RLINF_WEIGHTS_TOKEN(_FILE)``)."""
    from policy_server.push import BackgroundPusher, resolve_token

    token = resolve_token(token_file=token_file or None)
    return BackgroundPusher(url, token, timeout_s=timeout_s).start()


def plug_in() -> None:
    """Register the cross-room pieces a run may need (idempotent)."""
    from learner.offpolicy.remote import PUSH_CLIENTS

    PUSH_CLIENTS.add("websocket", websocket_pusher)
