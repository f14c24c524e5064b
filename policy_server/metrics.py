"""Server metrics rendered in the Prometheus text exposition format (``GET /metrics``).

Why hand-rolled: five series do not justify a dependency, and the text format is tiny. All
updates happen on the server's event-loop thread, so no locking is needed; rendering reads a
consistent snapshot on the same thread.

>>> m = ServerMetrics(window=16)
>>> m.observe_batch(3, forward_ms=1.5)
>>> m.observe_request(latency_ms=2.0)
>>> m.count_error("bad_request")
>>> text = m.render(weight_version=4, connections=1)
>>> "rlinf_policy_batch_size_bucket{le=\\"4\\"} 1" in text, "rlinf_policy_weight_version 4" in text
(True, True)
"""

from __future__ import annotations

import collections

import numpy as np

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
QUANTILES = (0.5, 0.9, 0.99)


class ServerMetrics:
    """Counters, a batch-size histogram and a sliding window of request latencies."""

    def __init__(self, window: int = 2048) -> None:
        self.requests = 0
        self.errors: collections.Counter[str] = collections.Counter()
        self.batches = 0
        self.batch_sum = 0
        self.forward_ms_sum = 0.0
        self.batch_buckets = [0] * len(BATCH_BUCKETS)
        self.weight_swaps = 0
        self.refused_pushes = 0
        self._latencies: collections.deque[float] = collections.deque(maxlen=window)
        self._latency_sum_ms = 0.0

    def observe_request(self, latency_ms: float) -> None:
        self.requests += 1
        self._latencies.append(latency_ms)
        self._latency_sum_ms += latency_ms

    def observe_batch(self, size: int, forward_ms: float) -> None:
        self.batches += 1
        self.batch_sum += size
        self.forward_ms_sum += forward_ms
        for i, bound in enumerate(BATCH_BUCKETS):
            if size <= bound:
                self.batch_buckets[i] += 1

    def count_error(self, kind: str) -> None:
        self.errors[kind] += 1

    def latency_quantiles(self) -> dict[float, float]:
        if not self._latencies:
            return {q: float("nan") for q in QUANTILES}
        values = np.quantile(np.fromiter(self._latencies, float), QUANTILES)
        return dict(zip(QUANTILES, (float(v) for v in values)))

    def render(self, weight_version: int, connections: int) -> str:
        p = "rlinf_policy_"
        lines = [
            f"# HELP {p}requests_total Inference requests answered with actions.",
            f"# TYPE {p}requests_total counter",
            f"{p}requests_total {self.requests}",
            f"# HELP {p}errors_total Requests or pushes answered with an error, by kind.",
            f"# TYPE {p}errors_total counter",
        ]
        lines += [f'{p}errors_total{{kind="{k}"}} {v}' for k, v in sorted(self.errors.items())]
        lines += [
            f"# HELP {p}batch_size Requests fused into one forward pass.",
            f"# TYPE {p}batch_size histogram",
        ]
        lines += [
            f'{p}batch_size_bucket{{le="{b}"}} {c}'
            for b, c in zip(BATCH_BUCKETS, self.batch_buckets)
        ]
        lines += [
            f'{p}batch_size_bucket{{le="+Inf"}} {self.batches}',
            f"{p}batch_size_sum {self.batch_sum}",
            f"{p}batch_size_count {self.batches}",
            f"# HELP {p}forward_ms_total Milliseconds spent in policy forwards (incl. thread "
            "hand-off).",
            f"# TYPE {p}forward_ms_total counter",
            f"{p}forward_ms_total {self.forward_ms_sum:.3f}",
            f"# HELP {p}latency_ms Server-side request latency (frame received to response "
            "ready), recent window.",
            f"# TYPE {p}latency_ms summary",
        ]
        lines += [
            f'{p}latency_ms{{quantile="{q}"}} {v:.4f}' for q, v in self.latency_quantiles().items()
        ]
        lines += [
            f"{p}latency_ms_sum {self._latency_sum_ms:.4f}",
            f"{p}latency_ms_count {self.requests}",
            f"# HELP {p}weight_version Version of the weights now serving.",
            f"# TYPE {p}weight_version gauge",
            f"{p}weight_version {weight_version}",
            f"# HELP {p}weight_swaps_total Weight versions applied since start.",
            f"# TYPE {p}weight_swaps_total counter",
            f"{p}weight_swaps_total {self.weight_swaps}",
            f"# HELP {p}refused_pushes_total Weight pushes refused (auth, stale version, bad "
            "payload).",
            f"# TYPE {p}refused_pushes_total counter",
            f"{p}refused_pushes_total {self.refused_pushes}",
            f"# HELP {p}connections Open websocket connections.",
            f"# TYPE {p}connections gauge",
            f"{p}connections {connections}",
        ]
        return "\n".join(lines) + "\n"
