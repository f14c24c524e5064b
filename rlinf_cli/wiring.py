"""Joins rooms that may not import each other, from the top room that may import them all.

The online off-policy learner (``learner/offpolicy/remote.py``) pushes weights to the policy
server, and with a ``server`` placement starts the robot sites' policy servers itself
(``learner/offpolicy/servers.py``), but ``learner`` may not import ``policy_server`` (imports only
point down; the learner must not depend on the serving package's internals). The CLI, which
imports both, plugs the server's own push client into the learner's ``PUSH_CLIENTS`` registry
and the server itself into ``POLICY_SERVERS`` before a run starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from learner.offpolicy.servers import ServeOptions


def websocket_pusher(url: str, token_file: str, timeout_s: float) -> Any:
    """A started :class:`policy_server.push.BackgroundPusher` for ``url`` (token from the file
    or ``RLINF_WEIGHTS_TOKEN(_FILE)``)."""
    from policy_server.push import BackgroundPusher, resolve_token

    token = resolve_token(token_file=token_file or None)
    return BackgroundPusher(url, token, timeout_s=timeout_s).start()


def placed_policy_server(options: ServeOptions) -> Any:
    """A started policy server for the checkpoint in ``options`` on its own thread (the server
    ``rlinf serve --checkpoint`` runs), with ``/weights`` open to the push token; the API key of
    inference clients, if any, from ``RLINF_API_KEY(_FILE)`` on the server's node."""
    from policy_server.background import ServerThread
    from policy_server.config import ServerConfig
    from policy_server.server import PolicyServer
    from rlinf_cli.serve import ServeConfig, load_served_policy

    server = ServerConfig(
        host=options.host,
        port=options.port,
        weights_token=options.weights_token,
        deterministic=options.deterministic,
    ).with_env_secrets()
    policy, version, name = load_served_policy(ServeConfig(options.checkpoint, server=server))
    return ServerThread(
        PolicyServer(policy, server, weight_version=version, policy_name=name)
    ).start()


def plug_in() -> None:
    """Register the cross-room pieces a run may need (idempotent)."""
    from learner.offpolicy.remote import PUSH_CLIENTS
    from learner.offpolicy.servers import POLICY_SERVERS

    PUSH_CLIENTS.add("websocket", websocket_pusher)
    POLICY_SERVERS.add("websocket", placed_policy_server)
