"""Versioned weight publication: a named store that rollout workers and drivers pull from.

:class:`WeightStore` — a named Ray actor holding ``(version, reference to the state dict)``.
``publish`` writes the tensors into the object store *first* and then swaps the reference in one
actor call, so publication is atomic: a reader gets the whole newest set or the whole previous
one, never a mix. Versions start at 1 and only grow. Readers anywhere in the cluster
``latest()`` or ``wait_newer(k)``; the bytes move through Ray's object store, not the actor.
``WeightStore.in_process()`` is the same interface inside one process, for inline drivers.

Outside the cluster (policy servers on another box) weights travel over the wire as
safetensors; that lives with the policy server, not here.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

import ray
import torch

from learner.channel.payload import pack, unpack

logger = logging.getLogger(__name__)

StateDict = dict[str, torch.Tensor]
ANSWER_GRACE_S = 30.0
"""How much longer than ``timeout`` a reader waits for the store actor's own answer."""
WARN_EVERY_S = 60.0
"""``wait_newer(timeout=None)`` logs a warning this often while it waits."""


class WeightStoreError(RuntimeError):
    """The weight store is missing, gone, or did not answer in time."""


class WeightTimeout(WeightStoreError, TimeoutError):
    """``wait_newer`` saw no newer version within its timeout."""


class _StoreActor:
    """State of one store: the newest version and a one-element list holding its reference."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._version = 0
        self._boxed_ref: list | None = None  # [ObjectRef, has_tensors]: a list, so Ray does not
        # resolve the reference on the way in or out
        self._changed: asyncio.Condition | None = None

    def _cond(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def publish(self, boxed_ref: list) -> int:
        cond = self._cond()
        async with cond:
            self._version += 1
            self._boxed_ref = boxed_ref
            cond.notify_all()
            return self._version

    async def latest(self) -> tuple[int, list | None]:
        return self._version, self._boxed_ref

    async def version(self) -> int:
        return self._version

    async def rebase(self, version: int) -> None:
        if self._version:
            raise ValueError(f"weight store {self._name!r}: rebase after a publish")
        self._version = int(version)

    async def wait_newer(self, than: int, timeout: float | None) -> tuple[int, list | None]:
        cond = self._cond()
        async with cond:
            try:
                await asyncio.wait_for(cond.wait_for(lambda: self._version > than), timeout)
            except TimeoutError:
                pass
            return self._version, self._boxed_ref


_RemoteStore = ray.remote(_StoreActor)


def _actor_name(name: str) -> str:
    return f"weights:{name}"


def _owned_copy(state: dict) -> StateDict:
    """Tensors the caller may modify: object-store buffers are shared by every reader on a node."""
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in state.items()}


class WeightStore:
    """Handle to a named weight store; picklable, so pass it to workers or ``connect`` by name."""

    def __init__(self, name: str, actor: Any) -> None:
        self.name = name
        self._actor = actor

    @classmethod
    def create(cls, name: str, namespace: str | None = None) -> WeightStore:
        """Start the store actor ``name`` (0 CPUs); the name must be new. Version starts at 0."""
        if not ray.is_initialized():
            raise WeightStoreError(
                f"weight store {name!r}: Ray is not initialised; call Cluster.local() first"
            )
        try:
            actor = _RemoteStore.options(
                name=_actor_name(name), namespace=namespace, num_cpus=0, max_concurrency=10_000
            ).remote(name)
        except ValueError as err:
            raise ValueError(
                f"weight store {name!r} already exists; use WeightStore.connect({name!r})"
            ) from err
        store = cls(name, actor)
        store.version()  # surface start-up errors here
        return store

    @classmethod
    def connect(cls, name: str, namespace: str | None = None, timeout: float = 30.0) -> WeightStore:
        """Join an existing store, waiting up to ``timeout`` s for it to be created."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return cls(name, ray.get_actor(_actor_name(name), namespace=namespace))
            except ValueError:
                if time.monotonic() >= deadline:
                    raise WeightStoreError(
                        f"weight store {name!r} does not exist (waited {timeout:.0f} s); create "
                        "it with WeightStore.create or check the name and Ray namespace"
                    ) from None
                time.sleep(0.1)

    def close(self) -> None:
        """Destroy the store actor; the published weights are released."""
        ray.kill(self._actor)

    def __reduce__(self) -> tuple:
        return (WeightStore, (self.name, self._actor))

    def __repr__(self) -> str:
        return f"WeightStore({self.name!r})"

    def _get(self, ref: Any, what: str, timeout: float | None) -> Any:
        try:
            return ray.get(ref, timeout=None if timeout is None else timeout + ANSWER_GRACE_S)
        except ray.exceptions.GetTimeoutError:
            ray.cancel(ref)
            raise WeightTimeout(f"weight store {self.name!r}: {what}: no answer") from None
        except (ray.exceptions.RayActorError, ray.exceptions.ActorDiedError) as err:
            raise WeightStoreError(f"weight store {self.name!r} is gone; {what} failed") from err

    def publish(self, state_dict: StateDict) -> int:
        """Publish a new set of weights and return its version (1, 2, ...).

        Tensors are detached and copied to the object store before the version changes, so the
        caller may keep training on the same tensors right away.
        """
        if not isinstance(state_dict, dict) or not state_dict:
            raise ValueError(
                f"weight store {self.name!r}: publish needs a non-empty dict of tensors, "
                f"got {type(state_dict).__name__}"
            )
        cpu = {
            k: v.detach().cpu() if isinstance(v, torch.Tensor) else v for k, v in state_dict.items()
        }
        packed = pack(cpu)
        boxed = [ray.put(packed.value), packed.has_tensors]
        return int(self._get(self._actor.publish.remote(boxed), "publish", 60.0))

    def version(self) -> int:
        """Newest published version (0 when nothing was published yet)."""
        return int(self._get(self._actor.version.remote(), "version()", 30.0))

    def rebase(self, version: int) -> None:
        """Before the first publish: number the next one ``version + 1``, so a resumed run's
        rollout workers and actor count versions from the checkpoint's, as one run."""
        self._get(self._actor.rebase.remote(version), "rebase", 30.0)

    def _open(self, version: int, boxed: list | None) -> tuple[int, StateDict]:
        if boxed is None:
            return version, {}
        ref, has_tensors = boxed
        try:
            value = ray.get(ref)
        except (ray.exceptions.OwnerDiedError, ray.exceptions.ObjectLostError) as err:
            raise WeightStoreError(
                f"weight store {self.name!r}: version {version} is lost: the process that "
                "published it exited (published objects live as long as their publisher); "
                "publish again from a live process"
            ) from err
        return version, _owned_copy(unpack(value, has_tensors))

    def latest(self) -> tuple[int, StateDict]:
        """``(version, state_dict)`` of the newest publication; ``(0, {})`` before the first."""
        return self._open(*self._get(self._actor.latest.remote(), "latest()", 30.0))

    def wait_newer(self, than: int, timeout: float | None = None) -> tuple[int, StateDict]:
        """Block until a version newer than ``than`` exists and return the newest one.

        Raises :class:`WeightTimeout` after ``timeout`` seconds; None waits for ever, logging a
        warning every :data:`WARN_EVERY_S` seconds.
        """
        waited = 0.0
        while True:
            step = WARN_EVERY_S if timeout is None else max(timeout - waited, 0.0)
            ref = self._actor.wait_newer.remote(int(than), step)
            version, boxed = self._get(ref, f"wait_newer(than={than})", step)
            waited += step
            if version > than or timeout is not None:
                break
            logger.warning(
                "weight store %r: no version newer than %d after %.0f s", self.name, than, waited
            )
        if version <= than:
            raise WeightTimeout(
                f"weight store {self.name!r}: no version newer than {than} within {timeout} s "
                f"(newest is {version}); is the publisher running?"
            )
        return self._open(version, boxed)

    @classmethod
    def in_process(cls, name: str = "local") -> WeightStore:
        """A store living in this process, without Ray: same methods, same versioning.

        Why: the inline drivers (one process, no cluster) should run the same publish / sync
        code as the distributed ones, so a bug in that path shows up in the fast CPU tests too.
        """
        return _InProcessStore(name)


class _InProcessStore(WeightStore):
    """:meth:`WeightStore.in_process`: a lock-guarded ``(version, state dict)`` pair."""

    def __init__(self, name: str) -> None:
        super().__init__(name, None)
        self._version, self._state = 0, {}
        self._changed = threading.Condition()

    def __reduce__(self) -> tuple:
        raise TypeError(
            f"{self!r} is in-process; use WeightStore.create to share weights between processes"
        )

    def __repr__(self) -> str:
        return f"WeightStore.in_process({self.name!r})"

    def close(self) -> None:
        self._state = {}

    def publish(self, state_dict: StateDict) -> int:
        if not isinstance(state_dict, dict) or not state_dict:
            raise ValueError(
                f"weight store {self.name!r}: publish needs a non-empty dict of tensors, "
                f"got {type(state_dict).__name__}"
            )
        copy = {
            k: v.detach().cpu().clone() if isinstance(v, torch.Tensor) else v
            for k, v in state_dict.items()
        }
        with self._changed:
            self._version, self._state = self._version + 1, copy
            self._changed.notify_all()
            return self._version

    def version(self) -> int:
        return self._version

    def rebase(self, version: int) -> None:
        with self._changed:
            if self._version:
                raise ValueError(f"weight store {self.name!r}: rebase after a publish")
            self._version = int(version)

    def latest(self) -> tuple[int, StateDict]:
        with self._changed:
            return self._version, _owned_copy(self._state)

    def wait_newer(self, than: int, timeout: float | None = None) -> tuple[int, StateDict]:
        with self._changed:
            if not self._changed.wait_for(lambda: self._version > than, timeout):
                raise WeightTimeout(
                    f"weight store {self.name!r}: no version newer than {than} within "
                    f"{timeout} s (newest is {self._version}); is the publisher running?"
                )
        return self.latest()
