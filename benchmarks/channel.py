"""Channel put+get throughput next to raw ``ray.put``/``ray.get`` of the same payloads.

For each payload size (1 KB, 1 MB, 16 MB of uint8) we time, in this driver process and in the
same Ray instance, two patterns:

* *stream* (the headline, what a producer/consumer pair does): put N items, then get N items.
  ``raw_stream`` = ``ray.put`` N times, then ``ray.get`` each ref; ``channel_stream`` = the same
  through an unbounded ``learner.channel.Channel`` (puts coalesced, gets prefetched);
  ``channel_stream_prefetch1`` = the same on a channel with ``prefetch=1``; ``rlinf_stream`` =
  RLinf 0.3.0's ``Channel``, when importable.
* *alternating*: ``put(x); get()`` item by item, so nothing can be batched: ``raw`` =
  ``ray.get(ray.put(x))``; ``channel`` (unbounded), ``channel_bounded`` (``maxsize=64``: every
  put acknowledged), ``channel_batched`` (``put_many`` of 16 then ``get_batch(16)``), ``rlinf``.

A second table moves the same payloads from a producer actor (another process) to the driver:
raw Ray is the driver fetching the producer's task returns (all calls submitted up front, Ray's
best case); the channel case has the producer ``put`` while the driver ``get``s.

The figure is ``items/s of a method / items/s of raw Ray in the same pattern``, from the median
of ``--repeats`` rounds; methods run interleaved in rotating order inside each round so machine
load hits them alike.
Target >= 0.8x raw at every size (floor 0.5x); absolute rates depend on the machine's load.

    .venv/bin/python benchmarks/channel.py              # full table, ~2-4 min on 2 busy cores
    .venv/bin/python benchmarks/channel.py --quick      # smoke run

Writes ``benchmarks/results/channel.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import numpy as np
import ray
from bench_results import RESULTS, load, now_utc, provenance, run_command

SIZES = {"1KB": 1024, "1MB": 1 << 20, "16MB": 16 << 20}
ITEMS = {"1KB": 300, "1MB": 150, "16MB": 30}
BATCH = 16


def _private_ray_init(real_init: Callable) -> Callable:
    """``ray.init`` that never joins another Ray instance on this host.

    RLinf's ``Cluster`` first tries ``ray.init(address="auto")``, which would attach to whatever
    Ray instance other jobs on a shared machine are running; refusing that attempt makes it
    fall back to starting a private local instance, as a benchmark needs.
    """

    def init(*args, **kwargs):
        if kwargs.get("address") == "auto":
            raise ConnectionError("benchmark: use a private Ray instance")
        kwargs.setdefault("num_cpus", 2)
        kwargs.setdefault("include_dashboard", False)
        return real_init(*args, **kwargs)

    return init


def start_rlinf() -> tuple[object | None, str]:
    """Start RLinf's cluster first (it insists on initialising Ray itself); our code reuses it."""
    real_init = ray.init
    try:
        import importlib.metadata

        from rlinf.scheduler import Cluster as RLinfCluster

        ray.init = _private_ray_init(real_init)
        RLinfCluster(num_nodes=1)
        return RLinfCluster, importlib.metadata.version("rlinf")
    except Exception as err:
        return None, f"not measured: {type(err).__name__}: {err}"
    finally:
        ray.init = real_init


def timed(step: Callable[[], None], n: int) -> float:
    """Items/s of ``n`` calls of ``step`` (one warm-up call first)."""
    step()
    t0 = time.perf_counter()
    for _ in range(n):
        step()
    return n / (time.perf_counter() - t0)


def rate(run: Callable[[int], None], n: int) -> float:
    """Items/s of ``run(n)`` moving ``n`` items (after a warm-up of a few items)."""
    run(min(n, 4))
    t0 = time.perf_counter()
    run(n)
    return n / (time.perf_counter() - t0)


def methods(x: np.ndarray, chans: dict, rlinf_ch: object | None) -> dict[str, Callable]:
    """``run(n)`` per method: moves ``n`` items through it, put then get, in this process.

    ``*_stream`` methods put all ``n`` items, then get all ``n`` (one producer, one consumer);
    the others alternate ``put(x); get()`` item by item, so nothing can be batched.
    """
    unbounded, bounded, no_prefetch = chans["unbounded"], chans["bounded"], chans["prefetch1"]

    def raw_stream(n: int) -> None:
        refs = [ray.put(x) for _ in range(n)]
        for ref in refs:
            ray.get(ref)

    def channel_stream(n: int) -> None:
        for _ in range(n):
            unbounded.put(x)
        for _ in range(n):
            unbounded.get(timeout=60)

    def channel_stream_prefetch1(n: int) -> None:
        for _ in range(n):
            no_prefetch.put(x)
        for _ in range(n):
            no_prefetch.get(timeout=60)

    def raw(n: int) -> None:
        for _ in range(n):
            ray.get(ray.put(x))

    def channel(n: int) -> None:
        for _ in range(n):
            unbounded.put(x)
            unbounded.get(timeout=60)

    def channel_bounded(n: int) -> None:
        for _ in range(n):
            bounded.put(x, timeout=60)
            bounded.get(timeout=60)

    def channel_batched(n: int) -> None:
        for _ in range(max(n // BATCH, 1)):
            unbounded.put_many([x] * BATCH)
            unbounded.get_batch(BATCH, timeout=60)

    out = {
        "raw_stream": raw_stream,
        "channel_stream": channel_stream,
        "channel_stream_prefetch1": channel_stream_prefetch1,
        "raw": raw,
        "channel": channel,
        "channel_bounded": channel_bounded,
        "channel_batched": channel_batched,
    }
    if rlinf_ch is not None:

        def rlinf_stream(n: int) -> None:
            for _ in range(n):
                rlinf_ch.put(x)
            for _ in range(n):
                rlinf_ch.get()

        def rlinf(n: int) -> None:
            for _ in range(n):
                rlinf_ch.put(x)
                rlinf_ch.get()

        out.update(rlinf_stream=rlinf_stream, rlinf=rlinf)
    return out


def baseline(method: str) -> str:
    """The raw Ray pattern a method is compared with."""
    return "raw_stream" if method.endswith("_stream") else "raw"


def run_size(label: str, repeats: int, chans: dict, rlinf_ch: object | None, quick: bool) -> dict:
    x = np.random.default_rng(0).integers(0, 255, SIZES[label], dtype=np.uint8)
    steps = methods(x, chans, rlinf_ch)
    n = max(ITEMS[label] // (5 if quick else 1), 3)
    rates: dict[str, list[float]] = {name: [] for name in steps}
    names = list(steps)
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:  # rotate the order
            n_items = max(n // BATCH, 1) * BATCH if name == "channel_batched" else n
            rates[name].append(rate(steps[name], n_items))
    med = {name: statistics.median(v) for name, v in rates.items()}
    row = {
        "bytes": SIZES[label],
        "items_per_round": n,
        "median_items_per_s": med,
        "ratio_vs_raw": {
            name: med[name] / med[baseline(name)] for name in med if not name.startswith("raw")
        },
        "all_items_per_s": rates,
    }
    print(f"{label:>5}: " + "  ".join(f"{k} {v:8.1f}/s" for k, v in med.items()))
    ratios = "  ".join(f"{k} {v:.2f}x" for k, v in row["ratio_vs_raw"].items())
    print(f"       ratio vs raw: {ratios}", flush=True)
    return row


@ray.remote(num_cpus=0)
class Producer:
    """Another process that makes payloads, as an env or rollout worker would."""

    def __init__(self, nbytes: int) -> None:
        self.x = np.random.default_rng(1).integers(0, 255, nbytes, dtype=np.uint8)

    def make(self) -> np.ndarray:
        return self.x

    def fill(self, channel, n: int) -> int:
        for _ in range(n):
            channel.put(self.x)
        channel.flush()
        return n


def run_cross_process(label: str, repeats: int, channel, quick: bool) -> dict:
    """Items/s moved from a producer actor to this driver: raw Ray (the driver fetches task
    returns, all calls submitted up front) vs the channel (producer puts while driver gets)."""
    producer = Producer.remote(SIZES[label])
    ray.get(producer.make.remote())
    n = max(ITEMS[label] // (5 if quick else 1), 3)

    def raw() -> float:
        t0 = time.perf_counter()
        refs = [producer.make.remote() for _ in range(n)]
        for ref in refs:
            ray.get(ref)
        return n / (time.perf_counter() - t0)

    def chan() -> float:
        t0 = time.perf_counter()
        done = producer.fill.remote(channel, n)
        for _ in range(n):
            channel.get(timeout=120)
        ray.get(done)
        return n / (time.perf_counter() - t0)

    rates: dict[str, list[float]] = {"raw_task_returns": [], "channel": []}
    for r in range(repeats):
        order = [("raw_task_returns", raw), ("channel", chan)][:: 1 if r % 2 == 0 else -1]
        for name, fn in order:
            rates[name].append(fn())
    med = {name: statistics.median(v) for name, v in rates.items()}
    ray.kill(producer)
    ratio = med["channel"] / med["raw_task_returns"]
    print(
        f"{label:>5} cross-process: raw task returns {med['raw_task_returns']:8.1f}/s  "
        f"channel {med['channel']:8.1f}/s  ratio {ratio:.2f}x"
    )
    return {"median_items_per_s": med, "ratio_vs_raw": ratio, "all_items_per_s": rates}


def actor_round_trip_ms(channel, repeats: int, quick: bool) -> float:
    """Median time of one empty call to the channel actor: the floor of any per-item get."""
    n = 40 if quick else 200
    return statistics.median(1e3 / timed(channel.qsize, n) for _ in range(repeats))


FINDINGS = """## How the channel gets these figures

1. **Consumer prefetch**: a get that calls the actor takes up to 64 ready items of the key and
   serves the next gets locally (the `channel_stream_prefetch1` column is the stream without
   it). Default 64 on unbounded channels (runners have one consumer per key), off on bounded
   ones (prefetched items no longer count against `maxsize`). Other consumers of a key do not
   see items one handle prefetched; channels shared by several consumers per key should use
   `prefetch=1`.
2. **Producer coalescing**: unbounded puts wait in the handle and go as one call at 64 items /
   1 MB inline bytes, after a 5 ms linger, with the handle's next read (same call), or before
   any read of the process blocks. The flusher thread is only woken when a new deadline is
   earlier than its next wake-up, since every wake-up costs the GIL.
3. **Bundles**: the large items (<= 4 MB) of one coalesced send are copied at put time
   (pickle-5 buffers) and written as *one* object when the send goes: one `ray.put` and one
   reference per send instead of per item (`learner/channel/bundle.py`); the consumer handle
   caches the last bundle it fetched, so its items cost one `ray.get` between them. 16 MB items
   keep their own `ray.put` (a 16 MB copy costs more than one object's overhead). Reads are
   zero-copy for numpy and CPU tensors.

Limits: the *alternating* pattern (`put(x); get()` item by item, nothing to batch) needs one
actor round trip per item (the put travels inside the get call), so it stays well below raw;
at 1 MB the call also carries the item's reference in and out. Cross-process at 16 MB (a
producer actor puts, the driver gets) is below raw task returns: each 16 MB item is its own
object owned by the producer and borrowed through the channel actor; bundling does not apply
above 4 MB.
"""


def _table(results: dict, raw: str, cols: list[str], bold: str) -> list[str]:
    """Markdown rows: items/s of ``raw`` and ``cols``, then each column's ratio to ``raw``."""
    first = next(iter(results["sizes"].values()))["median_items_per_s"]
    cols = [c for c in cols if c in first]
    lines = [
        f"| payload | {raw} items/s | "
        + " | ".join(f"{c} items/s" for c in cols)
        + " | "
        + " | ".join(f"{c} ratio" for c in cols)
        + " |",
        "|---" * (2 + 2 * len(cols)) + "|",
    ]
    for label, row in results["sizes"].items():
        med, ratio = row["median_items_per_s"], row["ratio_vs_raw"]
        lines.append(
            f"| {label} | {med[raw]:.1f} | "
            + " | ".join(f"{med[c]:.1f}" for c in cols)
            + " | "
            + " | ".join(f"**{ratio[c]:.2f}x**" if c == bold else f"{ratio[c]:.2f}x" for c in cols)
            + " |"
        )
    return lines


def write(results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "channel.json").write_text(json.dumps(results, indent=2))
    lines = [
        "# Channel put+get throughput vs raw ray.put/ray.get",
        "",
        *(f"{line}\n" for line in provenance(results)),
        f"Ray {results['ray']}; median of {results['repeats']} interleaved "
        "rounds. Ratio = method items/s / raw items/s of the same pattern (higher is better; "
        "target >= 0.8, floor 0.5).",
        "",
        "**Stream** (the headline): one driver puts N items, then gets the N items; raw = "
        "`refs = [ray.put(x) ...]` then `ray.get(ref)` one by one.",
        "",
        *_table(
            results,
            "raw_stream",
            ["channel_stream", "channel_stream_prefetch1", "rlinf_stream"],
            "channel_stream",
        ),
        "",
        "**Alternating**: `put(x); get()` item by item (raw = `ray.get(ray.put(x))`), so "
        "nothing can be coalesced or prefetched; every get is an actor round trip.",
        "",
        *_table(
            results, "raw", ["channel", "channel_bounded", "channel_batched", "rlinf"], "channel"
        ),
        "",
        "Cross-process (a producer actor puts, this driver gets; raw = the driver fetching the "
        "producer's task returns, all submitted up front):",
        "",
        "| payload | raw task returns items/s | channel items/s | ratio |",
        "|---|---|---|---|",
    ]
    for label, row in results["cross_process"].items():
        med = row["median_items_per_s"]
        lines.append(
            f"| {label} | {med['raw_task_returns']:.1f} | {med['channel']:.1f} | "
            f"{row['ratio_vs_raw']:.2f}x |"
        )
    rtt = results["actor_round_trip_ms"]
    raw_1k = 1e3 / results["sizes"]["1KB"]["median_items_per_s"]["raw"]
    lines += [
        "",
        f"One empty call to the channel actor took {rtt:.2f} ms in this run; a raw 1 KB "
        f"put+get took {raw_1k:.2f} ms. So the alternating pattern, which needs one actor call "
        "per item, cannot beat ~raw/(raw+round trip) at 1 KB.",
    ]
    notes = [f"- {note}" for note in results["notes"]]
    lines += ["", f"RLinf peer: {results['rlinf']}", "", *notes, "", FINDINGS]
    (RESULTS / "channel.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="fewer items and rounds")
    parser.add_argument("--no-rlinf", action="store_true", help="skip the RLinf peer")
    parser.add_argument(
        "--from-json", action="store_true", help="only re-render results/channel.md from its JSON"
    )
    args = parser.parse_args()
    if args.from_json:
        write(load("channel"))
        return
    repeats = 2 if args.quick else args.repeats

    rlinf_cls, rlinf_info = (None, "skipped (--no-rlinf)") if args.no_rlinf else start_rlinf()
    from learner.channel import Channel
    from learner.cluster import Cluster

    Cluster.local(num_cpus=2)  # reuses RLinf's Ray instance when it started one
    chans = {
        "unbounded": Channel.create("bench-unbounded"),
        "bounded": Channel.create("bench-bounded", maxsize=64),
        "prefetch1": Channel.create("bench-prefetch1", prefetch=1),
    }
    rlinf_ch = None
    if rlinf_cls is not None:
        from rlinf.scheduler import Channel as RLinfChannel

        rlinf_ch = RLinfChannel.create("bench-rlinf")
        rlinf_info = f"rlinf {rlinf_info} Channel, driven from the driver (put(x); get())"
    results = {
        "command": run_command(),
        "date": now_utc(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} at start",
        "ray": ray.__version__,
        "repeats": repeats,
        "rlinf": rlinf_info,
        "sizes": {},
        "notes": [
            "`channel_stream` / `channel` = unbounded channel with default settings (puts "
            "coalesced, gets prefetch); `channel_bounded` = maxsize 64 (each put acknowledged, "
            f"no prefetch); `channel_batched` = put_many + get_batch of {BATCH} items; "
            "`channel_stream_prefetch1` = the stream on a channel created with prefetch=1 "
            "(coalesced puts, one actor call per get): what prefetch adds.",
            "All rates come from one process on a machine shared with other jobs; compare "
            "ratios within a run, not absolute numbers across runs.",
            "RLinf's Cluster first tries to join any Ray instance running on the host "
            "(address='auto'); the benchmark refuses that attempt, so RLinf, our channel and "
            "raw Ray all run in one private Ray instance (2 CPUs) started by RLinf.",
        ],
    }
    for label in SIZES:
        results["sizes"][label] = run_size(label, repeats, chans, rlinf_ch, args.quick)
    results["actor_round_trip_ms"] = actor_round_trip_ms(chans["unbounded"], repeats, args.quick)
    results["cross_process"] = {
        label: run_cross_process(label, repeats, chans["unbounded"], args.quick) for label in SIZES
    }
    results["machine"] += f", {os.getloadavg()[0]:.1f} at end"
    write(results)
    print(f"wrote {RESULTS / 'channel.json'} and channel.md")


if __name__ == "__main__":
    main()
