"""Channel behaviour against a real Ray instance: FIFO, keys, batches, nowait, back-pressure."""

from __future__ import annotations

import asyncio
import gc
import itertools
import pickle
import threading
import time

import numpy as np
import pytest
import ray
import torch

from learner.channel import (
    DEFAULT_KEY,
    Channel,
    ChannelClosed,
    ChannelEmpty,
    ChannelFull,
    ChannelTimeout,
    flusher,
)
from learner.channel.buffers import COALESCE_ITEMS, PendingPuts, ReadBuffer
from learner.channel.channel import DEFAULT_PREFETCH, PUT_WINDOW
from learner.channel.payload import INLINE_LIMIT, pack, unpack

pytestmark = pytest.mark.ray

_ids = itertools.count()


@pytest.fixture
def channel(ray_cluster):
    ch = Channel.create(f"test-ch-{next(_ids)}")
    yield ch
    ch.close()


@pytest.fixture
def bounded(ray_cluster):
    ch = Channel.create(f"test-bounded-{next(_ids)}", maxsize=2)
    yield ch
    ch.close()


def test_fifo_per_key_and_key_isolation(channel):
    for i in range(5):
        channel.put(("a", i), key="a")
        channel.put(("b", i), key="b")
    channel.put("default")
    assert channel.qsize("a") == 5 and channel.qsize("b") == 5 and channel.qsize() == 1
    assert [channel.get(key="a", timeout=5) for _ in range(5)] == [("a", i) for i in range(5)]
    # key "a" drained; "b" untouched and still in order; default key separate
    assert channel.empty("a") and channel.qsize("b") == 5
    assert channel.get(timeout=5) == "default"
    assert [channel.get(key="b", timeout=5) for _ in range(5)] == [("b", i) for i in range(5)]
    with pytest.raises(ChannelEmpty, match=channel.name):
        channel.get_nowait(key="a")
    assert channel.keys() == [] and ray.get(channel._actor.info.remote())["queues_held"] == 0


def test_get_batch_and_by_weight(channel):
    for i in range(6):
        channel.put(i, key="k", weight=float(i % 3 + 1))  # weights 1,2,3,1,2,3
    assert channel.get_batch(2, key="k", timeout=5) == [0, 1]
    # head weights 3,1,2,3: the shortest head reaching 4.0 is [2, 3]
    assert channel.get_batch_by_weight(4.0, key="k", timeout=5) == [2, 3]
    assert channel.qsize("k") == 2
    with pytest.raises(ChannelTimeout, match="get_batch"):
        channel.get_batch(3, key="k", timeout=0.3)
    assert channel.get_batch(2, key="k", timeout=5) == [4, 5]  # a timed-out batch took nothing


def test_nowait_raises_on_full_and_empty(bounded):
    with pytest.raises(ChannelEmpty, match=f"{bounded.name}.*empty"):
        bounded.get_nowait()
    bounded.put_nowait(1)
    bounded.put_nowait(2)
    assert bounded.full() and not bounded.empty()
    with pytest.raises(ChannelFull, match=f"{bounded.name}.*maxsize=2"):
        bounded.put_nowait(3)
    assert bounded.get_nowait() == 1
    bounded.put_nowait(3)
    assert [bounded.get_nowait(), bounded.get_nowait()] == [2, 3]


def test_backpressure_blocked_producer_released_by_consumer(bounded):
    bounded.put("x0", key="k")
    bounded.put("x1", key="k")
    bounded.put("other", key="free")  # capacity is per key: another key is not blocked
    done = threading.Event()

    def produce() -> None:
        bounded.put("x2", key="k", timeout=20)
        done.set()

    producer = threading.Thread(target=produce)
    producer.start()
    time.sleep(0.8)
    assert not done.is_set(), "put into a full queue must block"
    assert bounded.qsize("k") == 2
    assert bounded.get(key="k", timeout=5) == "x0"  # frees one slot
    assert done.wait(10), "the blocked producer was not released by the consumer"
    producer.join(5)
    assert [bounded.get(key="k", timeout=5) for _ in range(2)] == ["x1", "x2"]
    bounded.put("a", key="free")  # second slot of "free"
    with pytest.raises(ChannelTimeout, match=bounded.name):
        bounded.put("b", key="free", timeout=0.2)


def test_large_numpy_and_torch_payloads_round_trip(channel):
    big = np.arange(INLINE_LIMIT, dtype=np.float32)  # 4x the inline limit: goes by reference
    tensor = torch.arange(300_000, dtype=torch.bfloat16)
    channel.put({"obs": big, "t": tensor, "small": torch.ones(3), "tag": "x"})
    item = channel.get(timeout=10)
    np.testing.assert_array_equal(item["obs"], big)
    assert item["t"].dtype == torch.bfloat16 and torch.equal(item["t"], tensor)
    assert torch.equal(item["small"], torch.ones(3)) and item["tag"] == "x"


def test_pack_boxes_tensors_and_measures_bytes():
    state = {"w": torch.zeros(10, 10), "nested": [np.zeros(5, np.uint8), (torch.ones(2),)]}
    packed = pack(state)
    assert packed.nbytes == 400 + 5 + 8 and packed.has_tensors and packed.inline
    assert not isinstance(packed.value["w"], torch.Tensor)
    back = unpack(packed.value, packed.has_tensors)
    assert torch.equal(back["w"], state["w"]) and isinstance(back["nested"][1], tuple)
    plain = {"a": np.zeros(INLINE_LIMIT + 1, np.uint8)}
    assert pack(plain).value is plain and not pack(plain).inline  # untouched, not copied


@ray.remote(num_cpus=0)
def _produce(ch: Channel, n: int) -> int:
    for i in range(n):
        ch.put(np.full(50_000, i, dtype=np.int32), key="w")  # 200 KB: by reference
    return n


def test_handle_crosses_to_workers_and_connect_by_name(channel):
    ref = _produce.remote(channel, 4)
    same = Channel.connect(channel.name)
    got = [int(same.get(key="w", timeout=30)[0]) for _ in range(4)]
    assert got == [0, 1, 2, 3] and ray.get(ref) == 4
    with pytest.raises(ChannelTimeout, match="does not exist"):
        Channel.connect("no-such-channel", timeout=0.2)
    with pytest.raises(ValueError, match="already exists"):
        Channel.create(channel.name)


def test_asyncio_variants(channel):
    async def roundtrip() -> list:
        getter = asyncio.ensure_future(channel.aget(key="a", timeout=10))
        await asyncio.sleep(0.2)
        await channel.aput(np.ones(200_000, np.uint8), key="a")
        await channel.aput(7, key="a")
        first = await getter
        return [first.sum(), await channel.aget_batch(1, key="a", timeout=5)]

    assert asyncio.run(roundtrip()) == [200_000, [7]]


def test_closed_channel_raises(ray_cluster):
    ch = Channel.create(f"test-closed-{next(_ids)}")
    ch.close()
    with pytest.raises(ChannelClosed, match=ch.name):
        for _ in range(50):  # ray.kill is asynchronous
            ch.qsize()
            time.sleep(0.1)


def test_unbounded_put_is_pipelined_but_ordered_and_visible(channel):
    """Unbounded puts return before the actor answers; order and visibility still hold.

    Ray may start an async actor's calls out of order; tickets restore each producer's order.
    """
    big = np.zeros(60_000, np.int32)  # 240 KB: every 5th item goes by reference
    for i in range(PUT_WINDOW + 10):
        channel.put(i if i % 5 else (i, big), key="p")
    assert len(channel._inflight) <= PUT_WINDOW  # the window bounds unacknowledged puts
    other = Channel.connect(channel.name)  # a second handle sees items once flushed
    channel.flush()
    assert not channel._inflight and other.qsize("p") == PUT_WINDOW + 10
    got = other.get_batch(PUT_WINDOW + 10, key="p", timeout=5)
    assert [x if isinstance(x, int) else x[0] for x in got] == list(range(PUT_WINDOW + 10))
    channel.put("seen", key="q")  # same handle: a later get is ordered after the put
    assert channel.get(key="q", timeout=5) == "seen"


# -- prefetch and coalescing ---------------------------------------------------------------
def test_buffers_merge_runs_and_restore_order():
    pending = PendingPuts()
    assert not pending.add("a", [(b"1", 1.0)]) and not pending.add("a", [(b"2", 1.0)])
    pending.add("b", [(b"3", 1.0)])
    pending.add("a", [(b"4", 1.0)])
    assert pending.drain() == [
        ("a", [(b"1", 1.0), (b"2", 1.0)]),
        ("b", [(b"3", 1.0)]),
        ("a", [(b"4", 1.0)]),
    ]
    assert len(pending) == 0 and pending.add("k", [(b"x", 1.0)] * COALESCE_ITEMS)
    ready = ReadBuffer()
    ready.push_back("k", [(i, w) for i, w in enumerate([1.0, 2.0, 3.0])])
    head, total = ready.pop_weight("k", 2.5)
    assert [i for i, _ in head] == [0, 1] and total == 3.0
    ready.push_front("k", head)  # an incomplete batch goes back in front, in order
    assert [ready.pop("k")[0] for _ in range(3)] == [0, 1, 2] and ready.pop("k") is None


def test_prefetch_keeps_fifo_and_hides_items_from_other_consumers(channel):
    assert channel.prefetch == DEFAULT_PREFETCH
    for i in range(10):
        channel.put(i, key="a")
        channel.put(-i, key="b")
    other = Channel.connect(channel.name)
    assert channel.get(key="a", timeout=5) == 0
    # the one call fetched the rest of "a": this handle still counts them, the actor does not
    assert channel._ready.count("a") == 9 and channel.qsize("a") == 9
    assert other.qsize("a") == 0 and other.qsize("b") == 10 and "a" in channel.keys()
    with pytest.raises(ChannelEmpty):
        other.get_nowait(key="a")  # prefetched items are invisible to another consumer
    channel.put(10, key="a")  # newer than the buffered items: comes after them
    assert channel.get_batch(3, key="a", timeout=5) == [1, 2, 3]
    with pytest.raises(ChannelTimeout):
        channel.get_batch(9, key="a", timeout=0.3)  # 6 buffered + 1 queued: not enough
    assert [channel.get(key="a", timeout=5) for _ in range(7)] == list(range(4, 11))
    assert [other.get(key="b", timeout=5) for _ in range(10)] == [-i for i in range(10)]


def test_prefetch_one_shares_a_key_between_consumers(ray_cluster):
    ch = Channel.create(f"test-nopf-{next(_ids)}", prefetch=1)
    try:
        other = Channel.connect(ch.name)
        assert other.prefetch == 1 and pickle.loads(pickle.dumps(ch)).prefetch == 1
        ch.put_many(list(range(4)))
        assert [ch.get(timeout=5), other.get(timeout=5), ch.get(timeout=5)] == [0, 1, 2]
        assert other.qsize() == 1 and ch._ready.count(DEFAULT_KEY) == 0
        with pytest.raises(ValueError, match="prefetch"):
            Channel.connect(ch.name, prefetch=0)
    finally:
        ch.close()


def test_weighted_batch_uses_prefetched_items_first(channel):
    for i in range(5):
        channel.put(i, key="w", weight=2.0)
    assert channel.get(key="w", timeout=5) == 0  # 1..4 now buffered in this handle
    assert channel.get_batch_by_weight(3.0, key="w", timeout=5) == [1, 2]
    channel.put(5, key="w", weight=2.0)
    assert channel.get_batch_by_weight(6.0, key="w", timeout=5) == [3, 4, 5]


def test_coalesced_puts_arrive_without_flush(channel, monkeypatch):
    """A lone put waits at most the linger time for company, then the flusher sends it."""
    monkeypatch.setattr(flusher, "LINGER_S", 0.5)  # long enough to see it waiting, even loaded
    channel.put("lone", key="c")
    assert len(channel._pending) == 1  # not sent yet: coalescing
    other = Channel.connect(channel.name, prefetch=1)
    assert other.get(key="c", timeout=10) == "lone"  # delivered with no read from `channel`
    for i in range(COALESCE_ITEMS):
        channel.put(i, key="d")  # reaching the size bound sends at once
    assert len(channel._pending) == 0
    assert other.get_batch(COALESCE_ITEMS, key="d", timeout=10) == list(range(COALESCE_ITEMS))


@ray.remote(num_cpus=0)
def _ping_pong(requests: Channel, replies: Channel, n: int) -> int:
    for i in range(n):
        requests.put(i)  # no flush: the blocking get on *another* channel sends it
        assert replies.get(timeout=30) == i * 10
    return n


def test_blocking_read_sends_the_processes_pending_puts(channel, ray_cluster):
    replies = Channel.create(f"test-replies-{next(_ids)}")
    try:
        done = _ping_pong.remote(channel, replies, 5)
        for _ in range(5):
            replies.put(channel.get(timeout=30) * 10)
        assert ray.get(done, timeout=60) == 5
    finally:
        replies.close()


def test_dropped_handle_gives_prefetched_items_back(channel):
    channel.put_many(list(range(6)), key="r")
    taker = Channel.connect(channel.name)
    assert taker.get(key="r", timeout=5) == 0 and taker._ready.count("r") == 5
    del taker
    gc.collect()
    assert channel.get_batch(5, key="r", timeout=10) == [1, 2, 3, 4, 5]  # back at the head


def test_large_puts_of_one_send_share_one_object_and_are_snapshots(channel):
    """Coalesced large items go to the object store as one bundle, copied at put time."""
    from learner.channel.bundle import BUNDLE_ITEM_LIMIT, Staged
    from learner.channel.payload import bundle_batches, seal

    x = np.arange(1 << 18, dtype=np.float32)  # 1 MB
    envelopes = [
        seal(x, 1.0, bundle=True),
        seal("small", 1.0, bundle=True),
        seal({"t": torch.ones(1 << 16)}, 2.0, bundle=True),
    ]
    assert isinstance(envelopes[0][0], Staged) and isinstance(envelopes[1][0], bytes)
    sent = bundle_batches([("a", envelopes[:2]), ("b", envelopes[2:])])
    refs = [p for _, envs in sent for p, _ in envs if isinstance(p, list)]
    assert len({r[0] for r in refs}) == 1 and [r[2] for r in refs] == [0, 1]  # one object
    assert sent[1][1][0][1] == 2.0  # weights kept
    too_big = seal(np.zeros(BUNDLE_ITEM_LIMIT + 1, np.uint8), 1.0, bundle=True)
    assert isinstance(too_big[0], list) and len(too_big[0]) == 2  # its own ray.put

    fortran = np.asfortranarray(np.arange(300 * 400, dtype=np.float64).reshape(300, 400))
    for i in range(3):
        channel.put(x, key="k")
        x[:] = i + 1  # a put is a snapshot: later writes must not reach the queued item
        channel.put({"f": fortran, "strided": fortran[::2, ::3], "i": i}, key="k")
    channel.put(torch.full((1 << 17,), 7.0), key="t")
    got = [channel.get(key="k", timeout=10) for _ in range(6)]
    assert [float(a[5]) for a in got[::2]] == [5.0, 1.0, 2.0]
    for i, item in enumerate(got[1::2]):
        assert item["i"] == i and np.array_equal(item["f"], fortran)
        assert np.array_equal(item["strided"], fortran[::2, ::3])
    assert torch.equal(channel.get(key="t", timeout=10), torch.full((1 << 17,), 7.0))


@ray.remote(num_cpus=0)
def _produce_bundles(ch: Channel, n: int) -> int:
    for i in range(n):
        ch.put(np.full(1 << 18, i, dtype=np.int32), key="big")  # 1 MB each: bundled per send
    ch.flush()
    return n


def test_bundles_from_another_process_keep_order(channel):
    done = _produce_bundles.remote(channel, 40)
    got = [int(channel.get(key="big", timeout=60)[0]) for _ in range(40)]
    assert got == list(range(40)) and ray.get(done, timeout=60) == 40
