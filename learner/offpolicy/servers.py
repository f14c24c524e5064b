"""The robot sites' policy servers, placed and started by the online run itself.

::

    placement: {learner,replay,env: 0@learner_node, server: 1-2@fleet:site}
        -> one PolicyServerWorker (a Ray actor) per server slot, on the node offering the label
        -> each serves <out_dir>/initial with /weights open to the push token
        -> their ws://<node ip>:<port> join push.url / push.urls as the pusher's targets

Why the run starts them (instead of one ``rlinf serve`` per site, by hand): a fleet's policy
servers sit next to its robots, on nodes that join the cluster with a site label; placing them
with the one grammar (``learner.placement``) puts each on its node, pushes reach every one of
them from the first update, and a site finds its server's URL in ``<out_dir>/ingest.json``.
Ray stays inside the cluster: robots still talk to their server and the ingest over ``ws://``.

Why the checkpoint travels as bytes: the initial actor is written on the learner's node; a server
node need not share its disk, so the servable files (``model.safetensors`` + ``meta.json``) go to
each actor with its constructor and are loaded from a private temporary directory there.

``learner`` may not import ``policy_server``: the server itself is built by a factory the top
room registers in :data:`POLICY_SERVERS` (``rlinf_cli.wiring``), handed to each actor as an
argument (a module-level function of the top room, so it travels by reference).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from learner.offpolicy.config import COMPONENTS, OPTIONAL, SERVER, OffPolicyConfig
from learner.placement import ComponentPlacement
from learner.worker import Worker, WorkerGroup
from rlinf_contracts.config import ConfigError
from rlinf_contracts.registry import Registry

log = logging.getLogger(__name__)
SERVED_FILES = ("model.safetensors", "meta.json")  # learner.checkpoint MODEL_FILE, META_FILE
START_TIMEOUT_S = 120.0  # loading torch and the actor on a busy node; a dead node fails here
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class ServeOptions:
    """What one placed server is built with (the ``servers`` section, resolved on its node)."""

    checkpoint: str  # directory holding SERVED_FILES
    host: str  # interface to bind
    port: int  # 0 = a free one
    deterministic: bool
    weights_token: str = field(repr=False)  # the push token: /weights refuses anything else


class ServedHandle(Protocol):
    """A started policy server, as the factory returns it."""

    @property
    def port(self) -> int: ...

    def stop(self, timeout: float = 10.0) -> None: ...


# ``ServeOptions -> ServedHandle``: the policy server (``policy_server.server``, served on its own
# thread), plugged in by ``rlinf_cli.wiring`` before a run starts.
POLICY_SERVERS: Registry[Callable[[ServeOptions], ServedHandle]] = Registry("policy server")


def _url(host: str, port: int) -> str:
    return f"ws://[{host}]:{port}" if ":" in host else f"ws://{host}:{port}"


class PolicyServerWorker(Worker):
    """One placed policy server in its own Ray actor: the checkpoint written to a private
    directory, loaded, served from a thread until :meth:`close`."""

    def __init__(
        self,
        make: Callable[[ServeOptions], ServedHandle],
        files: dict[str, bytes],
        options: ServeOptions,
    ) -> None:
        import ray
        from ray.util import get_node_ip_address

        self.node_ip = get_node_ip_address()
        self.node_id = ray.get_runtime_context().get_node_id()
        where = tempfile.mkdtemp(prefix="rlinf-served-")
        try:
            for name, data in files.items():
                Path(where, name).write_bytes(data)
            host = options.host or self.node_ip
            self.server = make(replace(options, checkpoint=where, host=host))
        finally:
            shutil.rmtree(where, ignore_errors=True)  # loaded: the weights live in memory now
        advertised = self.node_ip if host in ("0.0.0.0", "::") else host
        self.url = _url(advertised, self.server.port)

    def where(self) -> dict[str, Any]:
        """This server's URL and the Ray node it runs on (what ``ingest.json`` lists)."""
        return {"rank": self.rank, "url": self.url, "node_id": self.node_id, "ip": self.node_ip}

    def close(self) -> None:
        self.server.stop()


class PlacedServers:
    """The run's placed servers (none without a ``server`` placement): ``urls`` for the pusher,
    ``rows`` for ``ingest.json``, :meth:`stop` on close."""

    def __init__(self, group: WorkerGroup | None = None, rows: list[dict[str, Any]] | None = None):
        self.group, self.rows = group, list(rows or [])

    @property
    def urls(self) -> list[str]:
        return [r["url"] for r in self.rows]

    def stop(self) -> None:
        """Stop every server (connections closed with 1001), then end the actors."""
        if self.group is None:
            return
        try:
            self.group.call("close").wait(timeout=STOP_TIMEOUT_S)
        except Exception as e:  # a dead node: its actor is gone; end the others all the same
            log.warning("stopping the placed policy servers: %s", e)
        self.group.shutdown()
        self.group = None


def check_offered(placed: ComponentPlacement, offered: dict[str, float]) -> None:
    """Refuse, before anything starts, servers needing more units of their label than the
    cluster's nodes offer (Ray would keep them pending until the start timed out).

    >>> check_offered(ComponentPlacement(SERVER, [[1], [2]], {"fleet:site": 1.0}), {})
    Traceback (most recent call last):
    ...
    rlinf_contracts.config.errors.ConfigError: key 'placement': 2 server(s) need one unit each of
    'fleet:site' and the cluster offers 0; each site's node joins with ray start --resources ...
    """
    for label, unit in placed.resources.items():
        have = offered.get(label, 0.0)
        if have < unit * placed.num_processes:
            raise ConfigError(
                f"key 'placement': {placed.num_processes} {SERVER}(s) need one unit each of "
                f"{label!r} and the cluster offers {have:g}; each site's node joins with "
                f"ray start --resources '{{\"{label}\": 1}}'"
            )


def start_servers(cfg: OffPolicyConfig, checkpoint: Path) -> PlacedServers:
    """One started policy server per ``server`` slot, each serving ``checkpoint``; an empty
    :class:`PlacedServers` when the placement names no ``server``."""
    if not cfg.places_servers:
        return PlacedServers()
    import ray

    from learner.cluster import Cluster
    from learner.placement import parse_placement

    if not ray.is_initialized():
        raise ConfigError(
            f"key 'placement': '{SERVER}' starts policy servers as Ray actors, and this learner "
            "runs without Ray; start the run with `rlinf train` (it starts or joins a cluster "
            "for such a placement)"
        )
    if "websocket" not in POLICY_SERVERS.names():
        raise ConfigError(
            f"key 'placement': '{SERVER}' needs the policy server plugged into this process; "
            "start the learner with `rlinf train` (rlinf_cli.wiring plugs in policy_server)"
        )
    cluster = Cluster(owns_ray=False)
    placement = parse_placement(cfg.placement, cluster.num_slots, list(COMPONENTS), OPTIONAL)
    check_offered(placement[SERVER], cluster.custom_resources)
    files = {name: Path(checkpoint, name).read_bytes() for name in SERVED_FILES}
    options = ServeOptions(
        checkpoint="",
        host=cfg.servers.host,
        port=cfg.servers.port,
        deterministic=cfg.servers.deterministic,
        weights_token=cfg.push.token(),
    )
    group = WorkerGroup.launch(
        PolicyServerWorker,
        f"{cfg.name}-server",
        cluster,
        placement[SERVER],
        POLICY_SERVERS.get("websocket"),
        files,
        options,
    )
    try:
        rows = group.call("where").wait(timeout=START_TIMEOUT_S)
    except BaseException:
        group.shutdown()
        raise
    log.info(
        "placed %d policy server(s), robot sites find them in %s: %s",
        len(rows),
        Path(cfg.train.out_dir, "ingest.json"),
        ", ".join(f"{r['url']} (node {r['node_id'][:8]})" for r in rows),
    )
    return PlacedServers(group, rows)
