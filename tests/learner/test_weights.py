"""Weight store round trips through Ray, and the gloo broadcast across two real processes."""

from __future__ import annotations

import itertools
import threading
import time

import pytest
import ray
import torch
import torch.multiprocessing as mp

from learner.weights import WeightStore, WeightTimeout
from tests.learner.gloo_broadcast import GlooBroadcast, free_port

_ids = itertools.count()


def _model_state(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "enc.weight": torch.randn(256, 300, generator=g),  # 300 KB: travels through the store
        "enc.bias": torch.randn(256, generator=g).to(torch.bfloat16),
        "head.steps": torch.tensor(seed, dtype=torch.int64),
        "mask": torch.rand(7, 3, generator=g) > 0.5,
    }


def _assert_same(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
        assert torch.equal(a[key], b[key]), key


@pytest.fixture(scope="module")
def store(ray_cluster):
    """One store for the module (each actor is a new process, ~1-5 s here): tests that follow
    the first use versions relative to the current one."""
    s = WeightStore.create(f"test-weights-{next(_ids)}")
    yield s
    s.close()


@ray.remote(num_cpus=0)
class _Subscriber:
    """A reader in another process, as a rollout worker would be."""

    def __init__(self, store: WeightStore) -> None:
        self.store = store

    def wait_newer(self, than: int, timeout: float) -> tuple[int, dict]:
        return self.store.wait_newer(than, timeout=timeout)


@pytest.mark.ray
def test_publish_then_subscriber_gets_equal_weights_and_newer_version(store):
    assert store.version() == 0 and store.latest() == (0, {})
    state = _model_state(1)
    assert store.publish(state) == 1
    version, got = store.latest()
    assert version == 1
    _assert_same(got, state)
    got["enc.weight"].add_(1.0)  # a reader owns its copy: the published set is unchanged
    _assert_same(store.latest()[1], state)

    subscriber = _Subscriber.remote(store)
    pending = subscriber.wait_newer.remote(1, 30.0)
    time.sleep(0.5)
    state2 = _model_state(2)
    assert store.publish(state2) == 2
    version2, remote_got = ray.get(pending, timeout=60)
    assert version2 == 2
    _assert_same(remote_got, state2)


@pytest.mark.ray
def test_versions_are_monotonic_and_readers_never_see_a_mixed_set(store):
    """Concurrent publishers and readers: each read is exactly one published set."""
    sets = {seed: _model_state(seed) for seed in range(1, 7)}
    errors: list[str] = []

    def read_loop() -> None:
        last = 0
        for _ in range(15):
            version, got = store.latest()
            if version < last:
                errors.append(f"version went back from {last} to {version}")
            last = version
            if got:
                seed = int(got["head.steps"])
                if not torch.equal(got["enc.weight"], sets[seed]["enc.weight"]):
                    errors.append(f"mixed set at version {version}")

    reader = threading.Thread(target=read_loop)
    reader.start()
    base = store.version()
    versions = [store.publish(sets[seed]) for seed in sets]
    reader.join(60)
    assert versions == list(range(base + 1, base + 7)) and not errors


@pytest.mark.ray
def test_wait_newer_times_out_with_a_message(store):
    version = store.publish({"w": torch.zeros(2)})
    with pytest.raises(WeightTimeout, match=f"{store.name}.*newer than {version}"):
        store.wait_newer(version, timeout=0.3)
    assert store.wait_newer(version - 1, timeout=1)[0] == version  # already newer: at once


def _broadcast_rank(rank: int, port: int, result_queue) -> None:
    group = GlooBroadcast(rank, 2, "127.0.0.1", port, backend="gloo", timeout_s=60)
    first = group.broadcast_state_dict(_model_state(7) if rank == 0 else None, src=0)
    second = group.broadcast_state_dict(_model_state(8) if rank == 1 else None, src=1)
    ok = True
    try:
        _assert_same(first, _model_state(7))
        _assert_same(second, _model_state(8))
    except AssertionError:
        ok = False
    result_queue.put((rank, ok, group.backend))
    group.close()


def test_gloo_broadcast_across_two_processes():
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_broadcast_rank, args=(r, port, queue)) for r in range(2)]
    for p in procs:
        p.start()
    results = sorted(queue.get(timeout=90) for _ in procs)
    for p in procs:
        p.join(30)
    assert results == [(0, True, "gloo"), (1, True, "gloo")]
    assert all(p.exitcode == 0 for p in procs)


def test_in_process_store_has_the_same_versioning_without_ray():
    """The inline drivers' store: versions from 1, owned copies, timeouts, refuses to be shipped."""
    import pickle

    store = WeightStore.in_process("inline")
    assert store.latest() == (0, {}) and store.version() == 0
    state = _model_state(3)
    assert store.publish(state) == 1
    state["enc.weight"].add_(1.0)  # the publisher keeps training: the published copy must not move
    version, got = store.latest()
    assert version == 1
    _assert_same(got, _model_state(3))
    got["enc.weight"].zero_()  # readers own their copy
    _assert_same(store.latest()[1], _model_state(3))
    with pytest.raises(WeightTimeout, match="no version newer than 1"):
        store.wait_newer(1, timeout=0.05)
    threading.Timer(0.05, lambda: store.publish(_model_state(4))).start()
    assert store.wait_newer(1, timeout=5)[0] == 2
    with pytest.raises(ValueError, match="non-empty dict"):
        store.publish({})
    with pytest.raises(TypeError, match="in-process"):
        pickle.dumps(store)
