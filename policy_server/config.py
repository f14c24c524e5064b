"""Policy-server configuration: one typed dataclass, validated with errors that name the key.

Built from YAML / CLI flags through ``rlinf_contracts.config.from_dict`` (which calls
:meth:`validate`), or directly in Python. Secrets never travel on a command line (``ps`` shows argv
to every user): they come from the environment, ``RLINF_WEIGHTS_TOKEN`` (weight push) and
``RLINF_API_KEY`` (inference clients), or from files named by ``RLINF_WEIGHTS_TOKEN_FILE`` /
``RLINF_API_KEY_FILE`` or the ``weights_token_file`` / ``api_key_file`` keys (Docker / Kubernetes
secrets).

Safe defaults: the server binds loopback only; exposing it takes an explicit ``host: 0.0.0.0``.
Memory per connection is bounded by about ``(max_queued_frames + 1) * max_frame_bytes`` plus
``write_limit_bytes``; a client that stops reading replies for ``send_timeout_s`` is dropped.

>>> ServerConfig(port=8000).validate()
>>> ServerConfig(max_batch=0).validate()
Traceback (most recent call last):
...
rlinf_contracts.config.errors.ConfigError: key 'server.max_batch' must be >= 1, got 0; ...
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from rlinf_contracts.config.errors import ConfigError
from rlinf_contracts.wire import MIN_SECRET_CHARS

log = logging.getLogger(__name__)

WEIGHTS_TOKEN_ENV = "RLINF_WEIGHTS_TOKEN"
API_KEY_ENV = "RLINF_API_KEY"
FILE_SUFFIX = "_FILE"  # RLINF_API_KEY_FILE=/run/secrets/api_key
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


@dataclass
class ServerConfig:
    """Everything the policy server needs besides the policy itself."""

    host: str = field(
        default="127.0.0.1",
        metadata={"help": "interface to bind; 0.0.0.0 exposes the server (set an API key)"},
    )
    port: int = field(default=8000, metadata={"help": "TCP port; 0 picks a free port"})
    max_batch: int = field(default=32, metadata={"help": "most requests fused into one forward"})
    max_wait_ms: float = field(
        default=2.0, metadata={"help": "longest a request waits for others to join its batch"}
    )
    max_frame_bytes: int = field(
        default=8 * 2**20,
        metadata={"help": "largest observation frame accepted (close 1009 above)"},
    )
    max_weights_bytes: int = field(
        default=2 * 2**30, metadata={"help": "largest weight-push frame accepted on /weights"}
    )
    max_connections: int = field(default=64, metadata={"help": "concurrent inference connections"})
    idle_timeout_s: float = field(
        default=300.0,
        metadata={"help": "close a connection that sends no request for this long; 0 = never"},
    )
    evict_idle_s: float = field(
        default=10.0,
        metadata={
            "help": "when full, a new client takes the slot of a connection idle at least this long"
        },
    )
    send_timeout_s: float = field(
        default=10.0,
        metadata={
            "help": "drop a client whose replies cannot be written for this long (not reading)"
        },
    )
    max_queued_frames: int = field(
        default=2,
        metadata={"help": "received frames buffered per connection before reading pauses"},
    )
    write_limit_bytes: int = field(
        default=2**16,
        metadata={
            "help": "per-connection write buffer above which the server waits for the client"
        },
    )
    api_key: str | None = field(
        default=None,
        metadata={
            "help": f"require 'Authorization: Api-Key <key>' on / and /metrics (env {API_KEY_ENV})"
        },
    )
    api_key_file: str | None = field(default=None, metadata={"help": "file holding the API key"})
    weights_token: str | None = field(
        default=None,
        metadata={
            "help": "shared token for pushes on /weights; unset refuses all (env "
            f"{WEIGHTS_TOKEN_ENV})"
        },
    )
    weights_token_file: str | None = field(
        default=None, metadata={"help": "file holding the weights token"}
    )
    adapter: str = field(
        default="auto", metadata={"help": "observation layout: auto | canonical | openpi_flat"}
    )
    camera_map: dict[str, str] = field(
        default_factory=dict,
        metadata={"help": "foreign camera name -> policy camera name, e.g. {image: front}"},
    )
    deterministic: bool = field(default=True, metadata={"help": "serve the distribution's mode"})
    torch_threads: int = field(
        default=0,
        metadata={"help": "torch intra-op threads (also set in the forward thread); 0 = current"},
    )
    inline_forward_ms: float = field(
        default=1.0,
        metadata={
            "help": "forwards measured faster than this run on the I/O thread (no hand-off); 0 = "
            "never"
        },
    )
    latency_window: int = field(
        default=2048, metadata={"help": "requests kept for latency quantiles"}
    )

    def validate(self) -> None:
        def need(cond: bool, key: str, msg: str, value: object) -> None:
            if not cond:
                raise ConfigError(
                    f"key 'server.{key}' {msg}, got {value!r}; fix it in the config or flags"
                )

        need(0 <= self.port <= 65535, "port", "must be in 0..65535", self.port)
        need(self.max_batch >= 1, "max_batch", "must be >= 1", self.max_batch)
        need(
            0 <= self.max_wait_ms <= 1000, "max_wait_ms", "must be in 0..1000 ms", self.max_wait_ms
        )
        need(
            self.max_frame_bytes >= 1024, "max_frame_bytes", "must be >= 1024", self.max_frame_bytes
        )
        need(
            self.max_weights_bytes >= 1024,
            "max_weights_bytes",
            "must be >= 1024",
            self.max_weights_bytes,
        )
        need(self.max_connections >= 1, "max_connections", "must be >= 1", self.max_connections)
        need(
            self.idle_timeout_s >= 0,
            "idle_timeout_s",
            "must be >= 0 (0 = never)",
            self.idle_timeout_s,
        )
        need(self.evict_idle_s > 0, "evict_idle_s", "must be > 0", self.evict_idle_s)
        need(self.send_timeout_s > 0, "send_timeout_s", "must be > 0", self.send_timeout_s)
        need(
            self.max_queued_frames >= 1, "max_queued_frames", "must be >= 1", self.max_queued_frames
        )
        need(
            self.write_limit_bytes >= 1024,
            "write_limit_bytes",
            "must be >= 1024",
            self.write_limit_bytes,
        )
        need(self.torch_threads >= 0, "torch_threads", "must be >= 0", self.torch_threads)
        need(
            self.inline_forward_ms >= 0, "inline_forward_ms", "must be >= 0", self.inline_forward_ms
        )
        need(self.latency_window >= 16, "latency_window", "must be >= 16", self.latency_window)
        for key in ("api_key", "weights_token"):
            value = getattr(self, key)
            need(
                value is None or len(value) >= MIN_SECRET_CHARS,
                key,
                f"must be at least {MIN_SECRET_CHARS} characters (or unset)",
                "<hidden>",
            )

    @property
    def exposed(self) -> bool:
        """Bound beyond loopback (reachable from other machines)."""
        return self.host not in LOOPBACK_HOSTS

    def with_env_secrets(self) -> ServerConfig:
        """Fill unset secrets from their ``*_file`` keys, then ``RLINF_*_FILE``, then
        ``RLINF_*``."""
        for key, env in (("weights_token", WEIGHTS_TOKEN_ENV), ("api_key", API_KEY_ENV)):
            if getattr(self, key) is not None:
                continue
            path = getattr(self, f"{key}_file") or os.environ.get(env + FILE_SUFFIX)
            if path:
                setattr(self, key, read_secret_file(path, f"server.{key}_file"))
                source = (
                    f"the file {path!r}"
                    if getattr(self, f"{key}_file")
                    else f"{env}{FILE_SUFFIX}={path!r}"
                )
            elif os.environ.get(env):
                setattr(self, key, os.environ[env])
                source = f"${env}"
            else:
                continue
            # say where it came from: it is not in the config
            if len(getattr(self, key)) < MIN_SECRET_CHARS:
                raise ConfigError(
                    f"key 'server.{key}': the secret from {source} is shorter than "
                    f"{MIN_SECRET_CHARS} characters"
                )
        return self


def read_secret_file(path: str, key: str) -> str:
    """The secret in ``path`` (surrounding whitespace stripped); errors name the config key.

    Warns when the file is readable by group or others (``chmod 600`` it)."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8").strip()
        mode = p.stat().st_mode
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"key '{key}': cannot read secret file {str(p)!r}: {e}") from None
    if not text:
        raise ConfigError(f"key '{key}': secret file {str(p)!r} is empty")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("secret file %s is readable by other users; run: chmod 600 %s", p, p)
    return text
