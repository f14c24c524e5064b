"""Workers and worker groups: the unit the runners compose.

A :class:`Worker` subclass is plain Python; :meth:`WorkerGroup.launch` turns it into one Ray
actor per process rank of a :class:`~learner.placement.ComponentPlacement`. Each process is
pinned to its slots: on CPU slots its CPU affinity and torch thread count follow the slots (so
collocated components really time-share the same cores and disaggregated ones really do not);
on GPU slots ``CUDA_VISIBLE_DEVICES`` is set to them. Actors reserve no Ray CPU/GPU quota
because the placement, not Ray's bin-packing, decides who shares what.

Calls fan out to all ranks (``group.call("step")``) or some (``execute_on``) and return a
:class:`GroupResult`; ``wait()`` re-raises a worker exception as :class:`WorkerError` with the
group name, the rank and the worker's own traceback.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from learner.cluster import Cluster
from learner.placement import ComponentPlacement
from rlinf_contracts.config import ConfigError

log = logging.getLogger(__name__)


class WorkerError(RuntimeError):
    """A method raised inside a worker; carries the group, rank and remote traceback."""

    def __init__(self, group: str, rank: int, method: str, remote_traceback: str) -> None:
        self.group, self.rank, self.method = group, rank, method
        self.remote_traceback = remote_traceback
        super().__init__(f"worker '{group}' rank {rank} failed in {method}():\n{remote_traceback}")


@dataclass(frozen=True)
class WorkerContext:
    group_name: str
    rank: int
    world_size: int
    slots: tuple[int, ...]
    slot_kind: str
    cpu_count: int


class Worker:
    """Base class of every worker. Subclasses define ``__init__(self, ...)`` and methods.

    Available in ``__init__`` and after: ``rank``, ``world_size``, ``group_name``, ``slots``,
    ``num_slots``. ``offload`` / ``onload`` are the hooks collocated runners call around phases
    that need the slot's memory for another component (no-ops by default).
    """

    rank: int = 0
    world_size: int = 1
    group_name: str = "local"
    slots: tuple[int, ...] = ()

    @property
    def num_slots(self) -> int:
        return max(1, len(self.slots))

    def offload(self) -> None:
        """Free slot memory (e.g. move weights to host) while another component runs."""

    def onload(self) -> None:
        """Undo :meth:`offload`."""

    def ping(self) -> int:
        error = getattr(self, "_init_error", None)
        if error is not None:  # the constructor's ConfigError, raised where the driver waits
            raise error
        return self.rank


def _apply_context(worker: Worker, ctx: WorkerContext) -> None:
    worker.rank, worker.world_size = ctx.rank, ctx.world_size
    worker.group_name, worker.slots = ctx.group_name, ctx.slots
    if ctx.slot_kind == "cpu" and os.environ.get("RLINF_PIN_CPUS", "1") == "1":
        cores = {s % ctx.cpu_count for s in ctx.slots}
        try:
            os.sched_setaffinity(0, cores)
        except (AttributeError, OSError) as e:  # not Linux, or cores not ours
            log.debug("cpu affinity not set: %s", e)
    try:
        import torch

        torch.set_num_threads(max(1, len(ctx.slots)))
    except ImportError:
        pass


_OUR_PACKAGES = {"learner", "policy_server", "sim_bridges", "robot_drivers", "rlinf_ros"}


def _ship_by_value_if_local(cls: type) -> None:
    """Worker classes defined in scripts or test modules are not importable by Ray workers;
    ship their module by value (classes from our installed packages travel by reference)."""
    import sys

    from ray import cloudpickle

    module_name = cls.__module__
    if module_name.split(".")[0] in _OUR_PACKAGES or module_name == "__main__":
        return
    module = sys.modules.get(module_name)
    if module is not None:
        cloudpickle.register_pickle_by_value(module)


def _hosted(cls: type) -> type:
    """A subclass whose ``__init__`` takes the context first, then runs the user's init."""
    _ship_by_value_if_local(cls)

    def __init__(self: Any, _ctx: WorkerContext, *args: Any, **kwargs: Any) -> None:
        _apply_context(self, _ctx)
        try:
            cls.__init__(self, *args, **kwargs)
        except ConfigError as e:
            # a user's mistake (a missing demo store or weights file): kept for ping(), which
            # raises it as a task error carrying the exception itself, so the driver reports
            # the one line it says; a constructor that raises kills the actor, and Ray then
            # hands the driver only a traceback string
            self._init_error = e

    return type(
        cls.__name__,
        (cls,),
        {"__init__": __init__, "__module__": cls.__module__, "__qualname__": cls.__qualname__},
    )


class GroupResult:
    """Futures of one call on several ranks."""

    def __init__(self, group: str, method: str, ranks: list[int], refs: list[Any]) -> None:
        self.group, self.method, self.ranks, self.refs = group, method, ranks, refs

    def wait(self, timeout: float | None = None) -> list[Any]:
        """Results in rank order; raises WorkerError (first failing rank) or TimeoutError."""
        import ray

        ready, pending = ray.wait(self.refs, num_returns=len(self.refs), timeout=timeout)
        if pending:
            late = [r for r, ref in zip(self.ranks, self.refs) if ref in pending]
            raise TimeoutError(
                f"worker group '{self.group}': {self.method}() did not finish on rank(s) {late} "
                f"within {timeout} s"
            )
        out = []
        for rank, ref in zip(self.ranks, self.refs):
            try:
                out.append(ray.get(ref))
            except ray.exceptions.RayTaskError as e:
                cause = getattr(e, "cause", None)
                if isinstance(cause, ConfigError):  # the user's mistake: its one line
                    raise cause from None
                raise WorkerError(self.group, rank, self.method, _remote_traceback(e)) from None
            except ray.exceptions.RayActorError as e:
                raise WorkerError(
                    self.group, rank, self.method, f"the worker process died: {e}"
                ) from None
        return out


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _remote_traceback(e: Exception) -> str:
    tb = getattr(e, "traceback_str", None) or str(e)
    return _ANSI.sub("", tb)


class WorkerGroup:
    """N Ray actors of one Worker class, one per process rank of a placement."""

    def __init__(self, name: str, actors: list[Any], cls: type) -> None:
        self.name, self._actors, self._cls = name, actors, cls

    @classmethod
    def launch(
        cls,
        worker_cls: type[Worker],
        name: str,
        cluster: Cluster,
        placement: ComponentPlacement,
        *args: Any,
        per_rank_kwargs: Sequence[dict[str, Any]] | None = None,
        resources: dict[str, float] | None = None,
        **kwargs: Any,
    ) -> WorkerGroup:
        """Start one actor per process of ``placement``; ``resources`` (e.g.
        ``{"robot:franka0": 1}``, added to the placement's own ``<ranks>@<resource>``) pins the
        group to the node offering them."""
        import ray

        if not (isinstance(worker_cls, type) and issubclass(worker_cls, Worker)):
            raise TypeError(f"WorkerGroup.launch needs a Worker subclass, got {worker_cls!r}")
        world = placement.num_processes
        if per_rank_kwargs is not None and len(per_rank_kwargs) != world:
            raise ValueError(
                f"per_rank_kwargs has {len(per_rank_kwargs)} entries for {world} ranks"
            )
        remote_cls = ray.remote(_hosted(worker_cls))
        actors = []
        for rank, slots in enumerate(placement.process_slots):
            ctx = WorkerContext(
                name, rank, world, tuple(slots), cluster.slot_kind, os.cpu_count() or 1
            )
            options: dict[str, Any] = {
                "num_cpus": 0,
                "num_gpus": 0,
                "max_concurrency": 8,
                "name": None,
                "resources": {**placement.resources, **(resources or {})},
            }
            if cluster.slot_kind == "gpu":
                options["runtime_env"] = {
                    "env_vars": {"CUDA_VISIBLE_DEVICES": ",".join(map(str, slots))}
                }
            rank_kwargs = {**kwargs, **(per_rank_kwargs[rank] if per_rank_kwargs else {})}
            actors.append(remote_cls.options(**options).remote(ctx, *args, **rank_kwargs))
        group = cls(name, actors, worker_cls)
        group.call("ping").wait(timeout=120)  # surfaces constructor errors with rank + traceback
        log.info(
            "worker group '%s': %d x %s on slots %s",
            name,
            world,
            worker_cls.__name__,
            placement.slots,
        )
        return group

    @property
    def size(self) -> int:
        return len(self._actors)

    @property
    def actors(self) -> list[Any]:
        return list(self._actors)

    def _method(self, rank: int, method: str) -> Any:
        if not callable(getattr(self._cls, method, None)):
            raise AttributeError(
                f"worker group '{self.name}' ({self._cls.__name__}) has no method '{method}'"
            )
        return getattr(self._actors[rank], method)

    def call(self, method: str, *args: Any, **kwargs: Any) -> GroupResult:
        return self.execute_on(list(range(self.size)), method, *args, **kwargs)

    def execute_on(
        self, ranks: Sequence[int], method: str, *args: Any, **kwargs: Any
    ) -> GroupResult:
        bad = [r for r in ranks if not 0 <= r < self.size]
        if bad:
            raise IndexError(f"worker group '{self.name}' has ranks 0-{self.size - 1}, not {bad}")
        refs = [self._method(r, method).remote(*args, **kwargs) for r in ranks]
        return GroupResult(self.name, method, list(ranks), refs)

    def call_per_rank(self, method: str, args_per_rank: Sequence[tuple]) -> GroupResult:
        if len(args_per_rank) != self.size:
            raise ValueError(
                f"call_per_rank: {len(args_per_rank)} argument tuples for {self.size} ranks"
            )
        refs = [self._method(r, method).remote(*a) for r, a in enumerate(args_per_rank)]
        return GroupResult(self.name, method, list(range(self.size)), refs)

    def shutdown(self) -> None:
        import ray

        for actor in self._actors:
            ray.kill(actor, no_restart=True)
        self._actors = []
