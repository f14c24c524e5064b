"""The Ray cluster the learner runs on, seen as a set of *slots*.

A slot is a GPU where GPUs exist and a CPU core otherwise, so the same placement config
(``actor: 0-1``) means "two GPUs" on a GPU box and "two cores" on a laptop. Robots are
placement resources too: a robot PC that joins with ``--resources '{"robot:franka0": 1}'``
shows up in :attr:`Cluster.custom_resources` and workers can ask for it.

Embedded by default (``Cluster.local()``): nothing to start by hand. ``Cluster.connect(addr)``
joins an existing cluster and changes nothing else. ``InProcess(n)`` is the same slot view with
no Ray at all: a runner whose whole placement is one process on this machine (the fused
default) runs in the calling process and skips Ray's start-up.

Before anything starts, :func:`expected_slots` says how many slots an embedded cluster will
have (what Ray will detect: visible GPUs, else usable cores) and :func:`check_address` whether
``--ray-address`` names a cluster that is there, so placements and addresses are checked
without starting Ray.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from rlinf_contracts.config.errors import ConfigError

log = logging.getLogger(__name__)

_BUILTIN_RESOURCES = {"CPU", "GPU", "memory", "object_store_memory"}
RAY_CURRENT_CLUSTER = Path("/tmp/ray/ray_current_cluster")
"""Where ``ray start --head`` records its address (what ``--ray-address auto`` joins)."""


@dataclass
class ClusterConfig:
    address: str | None = field(
        default=None,
        metadata={
            "help": (
                "Ray address to join (e.g. 'auto', 'ray://host:10001'); null = embedded local Ray"
            )
        },
    )
    num_cpus: int | None = field(
        default=None, metadata={"help": "CPU slots of the embedded Ray (default: all cores)"}
    )
    num_gpus: int | None = field(
        default=None, metadata={"help": "GPU slots of the embedded Ray (default: all visible GPUs)"}
    )
    resources: dict[str, float] = field(
        default_factory=dict,
        metadata={"help": "custom resources of the embedded node, e.g. {'robot:franka0': 1}"},
    )

    def validate(self) -> None:
        if self.num_cpus is not None and self.num_cpus < 1:
            raise ConfigError(f"key 'cluster.num_cpus' must be >= 1, got {self.num_cpus}")
        if self.num_gpus is not None and self.num_gpus < 0:
            raise ConfigError(f"key 'cluster.num_gpus' must be >= 0, got {self.num_gpus}")


class Cluster:
    """A handle on the running Ray cluster: slots, custom resources, shutdown."""

    def __init__(self, owns_ray: bool) -> None:
        import ray

        self._owns_ray = owns_ray
        resources = ray.cluster_resources()
        self._gpus = int(resources.get("GPU", 0))
        self._cpus = int(resources.get("CPU", 0))
        self.custom_resources = {
            k: v
            for k, v in resources.items()
            if k not in _BUILTIN_RESOURCES
            and not k.startswith("node:")
            and not k.startswith("accelerator_type")
        }

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def local(
        cls,
        num_cpus: int | None = None,
        resources: dict[str, float] | None = None,
        num_gpus: int | None = None,
    ) -> Cluster:
        """Start (or reuse) an embedded Ray instance on this machine."""
        import ray

        if ray.is_initialized():
            return cls(owns_ray=False)
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # local use: nothing listens off-host
        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        # Ray starts worker processes at nice 15 by default, so a multi-process placement lost
        # the cores to every nice-0 process on the machine while the in-process runner did not
        # (measured with two nice-0 CPU hogs on 2 cores: workers at nice 0 ran split d1 at 0.50 s
        # per iteration, fair share; at nice 15 the same short run did not finish in 110 s).
        # Workers are the job here, not background helpers: they run at the driver's own
        # priority (`nice rlinf train` still lowers everything together).
        os.environ.setdefault("RAY_worker_niceness", str(os.nice(0)))
        log.info("starting embedded Ray (num_cpus=%s, resources=%s)", num_cpus, resources or {})
        ray.init(
            address="local",  # embedded: never join a cluster someone else started on this machine
            num_cpus=num_cpus,
            num_gpus=num_gpus,
            resources=resources or None,
            include_dashboard=False,
            log_to_driver=True,
            configure_logging=False,
            namespace="rlinf",
        )
        return cls(owns_ray=True)

    @classmethod
    def connect(cls, address: str) -> Cluster:
        """Join an existing Ray cluster (``ray start --head`` elsewhere)."""
        import ray

        if ray.is_initialized():
            return cls(owns_ray=False)
        log.info("joining Ray cluster at %s", address)
        try:
            ray.init(address=address, namespace="rlinf", configure_logging=False)
        except (ConnectionError, RuntimeError) as e:
            raise ConnectionError(
                f"cannot join the Ray cluster at '{address}': {e}. Is `ray start --head` running "
                "there?"
            ) from None
        return cls(owns_ray=True)

    @classmethod
    def from_config(cls, cfg: ClusterConfig) -> Cluster:
        if cfg.address:
            return cls.connect(cfg.address)
        return cls.local(num_cpus=cfg.num_cpus, resources=cfg.resources, num_gpus=cfg.num_gpus)

    # -- slots --------------------------------------------------------------------------------
    @property
    def slot_kind(self) -> Literal["gpu", "cpu"]:
        return "gpu" if self._gpus > 0 else "cpu"

    @property
    def num_slots(self) -> int:
        return self._gpus if self._gpus > 0 else self._cpus

    def describe(self) -> str:
        extra = f", custom {self.custom_resources}" if self.custom_resources else ""
        return f"{self.num_slots} {self.slot_kind.upper()} slots{extra}"

    def shutdown(self) -> None:
        import ray

        if self._owns_ray and ray.is_initialized():
            ray.shutdown()


class InProcess:
    """The slot view of this machine without Ray: for runs whose placement is one local process."""

    in_process = True
    custom_resources: dict[str, float] = {}

    def __init__(self, num_slots: int, slot_kind: Literal["gpu", "cpu"] = "cpu") -> None:
        self.num_slots, self.slot_kind = num_slots, slot_kind

    def describe(self) -> str:
        return f"{self.num_slots} {self.slot_kind.upper()} slots, in-process (no Ray)"

    def shutdown(self) -> None:
        """Nothing to stop."""


def _visible_gpus() -> int:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return len([d for d in env.split(",") if d.strip() and d.strip() != "-1"])
    gpus = Path("/proc/driver/nvidia/gpus")
    return len(list(gpus.iterdir())) if gpus.is_dir() else 0


def expected_slots(cfg: ClusterConfig) -> tuple[int, Literal["gpu", "cpu"]] | None:
    """Slots an embedded cluster of ``cfg`` will have, without starting it; None when joining one.

    >>> expected_slots(ClusterConfig(num_cpus=3, num_gpus=0))
    (3, 'cpu')
    >>> expected_slots(ClusterConfig(address="auto")) is None
    True
    """
    if cfg.address:
        return None
    gpus = cfg.num_gpus if cfg.num_gpus is not None else _visible_gpus()
    if gpus > 0:
        return gpus, "gpu"
    if cfg.num_cpus is not None:
        return cfg.num_cpus, "cpu"
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return cores, "cpu"


def _reachable(host: str, port: int, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def check_address(address: str, key: str = "--ray-address") -> None:
    """Raise ``ConnectionError`` (one line naming ``key`` and the fix) if no Ray cluster answers
    there."""
    fix = f"start one with `ray start --head` there, or leave out {key} to embed Ray"
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS", "")
        text = RAY_CURRENT_CLUSTER.read_text().strip() if RAY_CURRENT_CLUSTER.is_file() else ""
        if not address and text:
            address = text.splitlines()[0]
        if not address:
            raise ConnectionError(
                f"{key} auto: no Ray cluster is running on this machine; start one with "
                f"`ray start --head`, or leave out {key} to embed Ray"
            )
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ConnectionError(f"{key} {address!r}: expected HOST:PORT, ray://HOST:PORT or auto")
    if not _reachable(host, int(port)):
        raise ConnectionError(f"{key} {address}: nothing is listening there; {fix}")
