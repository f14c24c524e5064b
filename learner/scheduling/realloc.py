"""Dynamic reallocation: slots move from rollout (and env) to the actor once generation ends.

In the on-policy channel topology every iteration has two phases on disjoint work: env +
rollout produce the trajectories, then the actor trains on them while env and rollout wait
for the new weights (the rollout worker's ``sync_weights`` blocks on version v+1). A
:class:`~learner.actor.worker.ActorWorker` built with ``lend`` therefore widens its CPU
affinity and torch threads (:func:`widened`) to the env and rollout slots for the update -- the
trajectories are all in, so those slots are idle -- and gives them back before publishing. The
data, the order of updates and the weight versions are exactly those of the static placement:
the guarantee that iteration i+1 samples with the weights trained on iteration i is untouched;
only the threads of the update change (so floating-point sums may differ in the last bits from a
static run).

``rollout.reallocate: true`` turns it on (``learner.runners.topology``); with several actor
ranks the lent slots are dealt out round-robin. On GPU slots the same move needs the actor to
shard onto the lent GPUs (not built: ``lend`` is ignored there and the log says so).

>>> lent_slots([[0], [1]], [[2], [3]], rank=1, ranks=2)
(1, 3)
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

log = logging.getLogger(__name__)


def lent_slots(
    env: list[list[int]], rollout: list[list[int]], rank: int, ranks: int
) -> tuple[int, ...]:
    """The env + rollout slots actor rank ``rank`` borrows during its update."""
    pool = sorted({s for procs in (env, rollout) for p in procs for s in p})
    return tuple(pool[rank::ranks])


@contextlib.contextmanager
def widened(lend: tuple[int, ...]) -> Iterator[None]:
    """This process runs on its own cores plus ``lend`` (and as many torch threads) inside."""
    if not lend or not hasattr(os, "sched_getaffinity"):
        yield
        return
    import torch

    cores = os.cpu_count() or 1
    saved, threads = os.sched_getaffinity(0), torch.get_num_threads()
    wide = saved | {s % cores for s in lend}
    try:
        os.sched_setaffinity(0, wide)
        torch.set_num_threads(len(wide))
        yield
    finally:
        os.sched_setaffinity(0, saved)
        torch.set_num_threads(threads)
