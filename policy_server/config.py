"""Policy-server configuration: one typed dataclass, validated with errors that name the key.

Built from YAML / CLI flags through ``rlinf_contracts.config.from_dict`` (which calls :meth:`validate`),
or directly in Python. Secrets may come from the environment so they stay out of config files:
``RLINF_WEIGHTS_TOKEN`` (weight push) and ``RLINF_API_KEY`` (inference clients).

>>> ServerConfig(port=8000).validate()
>>> ServerConfig(max_batch=0).validate()
Traceback (most recent call last):
...
rlinf_contracts.config.errors.ConfigError: key 'server.max_batch' must be >= 1, got 0; ...
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from rlinf_contracts.config.errors import ConfigError

WEIGHTS_TOKEN_ENV = "RLINF_WEIGHTS_TOKEN"
API_KEY_ENV = "RLINF_API_KEY"


@dataclass
class ServerConfig:
    """Everything the policy server needs besides the policy itself."""

    host: str = field(default="0.0.0.0", metadata={"help": "interface to bind (127.0.0.1 = local only)"})
    port: int = field(default=8000, metadata={"help": "TCP port; 0 picks a free port"})
    max_batch: int = field(default=32, metadata={"help": "most requests fused into one forward"})
    max_wait_ms: float = field(
        default=2.0, metadata={"help": "longest a request waits for others to join its batch"}
    )
    max_frame_bytes: int = field(
        default=8 * 2**20, metadata={"help": "largest observation frame accepted (close 1009 above)"}
    )
    max_weights_bytes: int = field(
        default=2 * 2**30, metadata={"help": "largest weight-push frame accepted on /weights"}
    )
    max_connections: int = field(default=256, metadata={"help": "concurrent websocket connections"})
    api_key: str | None = field(
        default=None, metadata={"help": f"require 'Authorization: Api-Key <key>' on / (env {API_KEY_ENV})"}
    )
    weights_token: str | None = field(
        default=None,
        metadata={"help": f"shared token for pushes on /weights; unset refuses all (env {WEIGHTS_TOKEN_ENV})"},
    )
    adapter: str = field(
        default="auto", metadata={"help": "observation layout: auto | canonical | openpi_flat"}
    )
    camera_map: dict[str, str] = field(
        default_factory=dict,
        metadata={"help": "foreign camera name -> policy camera name, e.g. {image: front}"},
    )
    deterministic: bool = field(default=True, metadata={"help": "serve the distribution's mode"})
    torch_threads: int = field(default=0, metadata={"help": "torch intra-op threads (also set in the forward thread); 0 = current"})
    inline_forward_ms: float = field(
        default=1.0,
        metadata={"help": "forwards measured faster than this run on the I/O thread (no hand-off); 0 = never"},
    )
    latency_window: int = field(default=2048, metadata={"help": "requests kept for latency quantiles"})

    def validate(self) -> None:
        def need(cond: bool, key: str, msg: str, value: object) -> None:
            if not cond:
                raise ConfigError(f"key 'server.{key}' {msg}, got {value!r}; fix it in the config or flags")

        need(0 <= self.port <= 65535, "port", "must be in 0..65535", self.port)
        need(self.max_batch >= 1, "max_batch", "must be >= 1", self.max_batch)
        need(0 <= self.max_wait_ms <= 1000, "max_wait_ms", "must be in 0..1000 ms", self.max_wait_ms)
        need(self.max_frame_bytes >= 1024, "max_frame_bytes", "must be >= 1024", self.max_frame_bytes)
        need(self.max_weights_bytes >= 1024, "max_weights_bytes", "must be >= 1024", self.max_weights_bytes)
        need(self.max_connections >= 1, "max_connections", "must be >= 1", self.max_connections)
        need(self.torch_threads >= 0, "torch_threads", "must be >= 0", self.torch_threads)
        need(self.inline_forward_ms >= 0, "inline_forward_ms", "must be >= 0", self.inline_forward_ms)
        need(self.latency_window >= 16, "latency_window", "must be >= 16", self.latency_window)
        for key in ("api_key", "weights_token"):
            value = getattr(self, key)
            need(value is None or len(value) >= 8, key, "must be at least 8 characters (or unset)", "<hidden>")

    def with_env_secrets(self) -> "ServerConfig":
        """Fill unset secrets from ``RLINF_WEIGHTS_TOKEN`` / ``RLINF_API_KEY``."""
        if self.weights_token is None and os.environ.get(WEIGHTS_TOKEN_ENV):
            self.weights_token = os.environ[WEIGHTS_TOKEN_ENV]
        if self.api_key is None and os.environ.get(API_KEY_ENV):
            self.api_key = os.environ[API_KEY_ENV]
        return self
