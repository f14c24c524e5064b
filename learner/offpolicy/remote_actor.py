"""The remote learner in a Ray actor: the top room's plug-ins travel with it.

Why: ``rlinf_cli.wiring`` fills the learner's plug-in registries (the weight push client, the
policy-server factory) in the process that runs ``rlinf train``. A run that places its robots'
policy servers (placement ``server``) needs a Ray cluster, and then the learner runs where its
placement puts it (``learner,replay: 0@learner_node``): a fresh actor process whose registries are
empty. The entries are module-level functions of the top room, so they travel by reference and
are registered again in the actor before the learner starts. The caller's log level travels too:
what an in-process learner logs (the ingest's URL, the placed servers, the learner falling behind)
must reach the operator's console, which Ray forwards the actor's stderr to.
"""

from __future__ import annotations

import logging
from typing import Any

from learner.offpolicy.config import OffPolicyConfig
from learner.offpolicy.remote import PUSH_CLIENTS, RemoteLearnerWorker
from learner.offpolicy.servers import POLICY_SERVERS
from rlinf_contracts.registry import Registry

PLUGGED: tuple[Registry[Any], ...] = (PUSH_CLIENTS, POLICY_SERVERS)


def plugins() -> list[dict[str, Any]]:
    """What this process has plugged into each of :data:`PLUGGED`, in that order."""
    return [{name: registry.get(name) for name in registry.names()} for registry in PLUGGED]


class HostedRemoteLearner(RemoteLearnerWorker):
    """:class:`RemoteLearnerWorker` with the caller's :func:`plugins` registered first."""

    def __init__(
        self, cfg: OffPolicyConfig, plugged: list[dict[str, Any]], log_level: int = logging.INFO
    ) -> None:
        logging.basicConfig(level=log_level, format="%(levelname).1s %(name)s: %(message)s")
        for registry, entries in zip(PLUGGED, plugged, strict=True):
            for name, obj in entries.items():
                if name not in registry.names():
                    registry.add(name, obj)
        super().__init__(cfg)
