"""The Ray cluster the learner runs on, seen as a set of *slots*.

A slot is a GPU where GPUs exist and a CPU core otherwise, so the same placement config
(``actor: 0-1``) means "two GPUs" on a GPU box and "two cores" on a laptop. Robots are
placement resources too: a robot PC that joins with ``--resources '{"robot:franka0": 1}'``
shows up in :attr:`Cluster.custom_resources` and workers can ask for it.

Embedded by default (``Cluster.local()``): nothing to start by hand. ``Cluster.connect(addr)``
joins an existing cluster and changes nothing else.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Literal

from rlinf_contracts.config.errors import ConfigError

log = logging.getLogger(__name__)

_BUILTIN_RESOURCES = {"CPU", "GPU", "memory", "object_store_memory"}


@dataclass
class ClusterConfig:
    address: str | None = field(
        default=None, metadata={"help": "Ray address to join (e.g. 'auto', 'ray://host:10001'); null = embedded local Ray"})
    num_cpus: int | None = field(
        default=None, metadata={"help": "CPU slots of the embedded Ray (default: all cores)"})
    num_gpus: int | None = field(
        default=None, metadata={"help": "GPU slots of the embedded Ray (default: all visible GPUs)"})
    resources: dict[str, float] = field(
        default_factory=dict, metadata={"help": "custom resources of the embedded node, e.g. {'robot:franka0': 1}"})

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
            k: v for k, v in resources.items()
            if k not in _BUILTIN_RESOURCES and not k.startswith("node:") and not k.startswith("accelerator_type")
        }

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def local(
        cls,
        num_cpus: int | None = None,
        resources: dict[str, float] | None = None,
        num_gpus: int | None = None,
    ) -> "Cluster":
        """Start (or reuse) an embedded Ray instance on this machine."""
        import ray

        if ray.is_initialized():
            return cls(owns_ray=False)
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # local use: nothing listens off-host
        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        log.info("starting embedded Ray (num_cpus=%s, resources=%s)", num_cpus, resources or {})
        ray.init(
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
    def connect(cls, address: str) -> "Cluster":
        """Join an existing Ray cluster (``ray start --head`` elsewhere)."""
        import ray

        if ray.is_initialized():
            return cls(owns_ray=False)
        log.info("joining Ray cluster at %s", address)
        try:
            ray.init(address=address, namespace="rlinf", configure_logging=False)
        except (ConnectionError, RuntimeError) as e:
            raise ConnectionError(
                f"cannot join the Ray cluster at '{address}': {e}. Is `ray start --head` running there?"
            ) from None
        return cls(owns_ray=True)

    @classmethod
    def from_config(cls, cfg: ClusterConfig) -> "Cluster":
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
