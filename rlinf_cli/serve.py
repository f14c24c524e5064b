"""``rlinf serve``: run the policy server for a checkpoint (or a config naming a model).

- ``rlinf serve --checkpoint runs/x/checkpoints/final --port 8000 [--weights-token-file F]``
- ``rlinf serve --config serve.yaml [key=value ...]`` where the YAML has ``checkpoint:`` or
  ``policy: {name, spec, kwargs}`` and an optional ``server:`` section (``ServerConfig`` keys).
- An LLM checkpoint (``runner: reasoning``) is served as OpenAI-style text completions over
  HTTP instead (:mod:`learner.llm.completions`), on the same ``--host`` / ``--port`` / API key.

The listen port is checked before the model loads: a busy one is refused with the flag to
change it. Flags override the config file. Secrets never come from the command line (argv is
visible to every user): ``--api-key-file`` / ``--weights-token-file``, or ``RLINF_API_KEY`` /
``RLINF_WEIGHTS_TOKEN`` (and their ``*_FILE`` forms). Runs until SIGINT (Ctrl-C) or SIGTERM
(``docker stop``, systemd), then closes every connection with 1001 and exits 0: a requested stop
is a clean exit, so a supervisor does not count it as a failure.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

# flag name -> ServerConfig field (flags left at None do not override the config file)
_FLAGS: dict[str, tuple[type, str]] = {
    "host": (
        str,
        "interface to bind (default 127.0.0.1; 0.0.0.0 exposes the server: set an API key)",
    ),
    "port": (int, "TCP port (default 8000; 0 picks a free one)"),
    "max_batch": (int, "most requests fused into one forward (default 32)"),
    "max_wait_ms": (float, "longest a request waits for batch mates (default 2 ms)"),
    "max_frame_bytes": (int, "largest observation frame (default 8 MiB)"),
    "max_connections": (int, "concurrent client connections (default 64)"),
    "api_key_file": (
        str,
        "file with the key inference clients must send ('Authorization: Api-Key <key>')",
    ),
    "weights_token_file": (
        str,
        "file with the shared token that authorises weight pushes on /weights",
    ),
    "adapter": (str, "observation layout: auto | canonical | openpi_flat"),
    "torch_threads": (int, "torch intra-op threads (default: torch's choice)"),
}


@dataclass
class PolicySource:
    """A model built from scratch (random weights): for smoke tests and benchmarks."""

    name: str = field(
        default="mlp", metadata={"help": "model registry name (learner.models.MODELS)"}
    )
    spec: dict[str, Any] = field(default_factory=dict, metadata={"help": "PolicySpec fields"})
    kwargs: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "model constructor kwargs"}
    )


@dataclass
class ServeConfig:
    """Top level of ``rlinf serve --config``."""

    checkpoint: str | None = field(default=None, metadata={"help": "checkpoint dir to serve"})
    policy: PolicySource | None = field(
        default=None, metadata={"help": "build a fresh model instead"}
    )
    device: str = field(
        default="cpu", metadata={"help": "torch device for the served model, e.g. cuda:0"}
    )
    server: Any = None  # ServerConfig; typed lazily so --help does not import torch


class _NoSecretOnArgv(argparse.Action):
    """Refuses a secret given as a flag, without echoing it."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        parser.error(
            f"{self.option_strings[0]} is not accepted: argv is visible to every user; use "
            f"{self.option_strings[0]}-file FILE or RLINF_{self.dest.upper()}"
        )


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve a policy over the openpi-compatible websocket wire (an LLM checkpoint: "
        "OpenAI-style text completions over HTTP)",
    )
    p.add_argument(
        "--checkpoint", default=None, help="checkpoint directory (model.safetensors + meta.json)"
    )
    p.add_argument(
        "--config", default=None, help="YAML with checkpoint: / policy: and a server: section"
    )
    p.add_argument(
        "--device", default=None, help="torch device for the model (default cpu), e.g. cuda:0"
    )
    for name, (tp, help_text) in _FLAGS.items():
        p.add_argument(
            f"--{name.replace('_', '-')}", dest=name, type=tp, default=None, help=help_text
        )
    # the old secret flags, refused by name: else argparse would take them as --*-file
    # abbreviations
    for old in ("--api-key", "--weights-token"):
        p.add_argument(old, action=_NoSecretOnArgv, help=argparse.SUPPRESS)
    p.add_argument(
        "overrides",
        nargs="*",
        help="key=value overrides, e.g. server.max_batch=8 (applied over --config)",
    )
    p.set_defaults(run=run)


def build_config(args: argparse.Namespace, env_secrets: bool = True) -> ServeConfig:
    """Merge YAML, overrides and flags into a validated :class:`ServeConfig`; ``env_secrets``
    False reads no secret (``rlinf online`` checks the config before the token files exist)."""
    from policy_server.config import ServerConfig
    from rlinf_contracts.config import ConfigError, from_dict, load_config

    overrides = list(getattr(args, "overrides", None) or [])
    for item in overrides:
        if item.split("=", 1)[0] in ("server.api_key", "server.weights_token"):
            raise ConfigError(
                f"'{item.split('=', 1)[0]}' must not be given on the command line (argv is visible "
                "to every user): use the RLINF_* environment variable or a *_file key/flag"
            )
    raw = load_config(args.config, overrides)
    server_raw = dict(raw.pop("server", None) or {})
    for name in _FLAGS:
        if getattr(args, name, None) is not None:
            server_raw[name] = getattr(args, name)
    if args.checkpoint:
        raw["checkpoint"] = args.checkpoint
    if getattr(args, "device", None):
        raw["device"] = args.device
    cfg = from_dict(ServeConfig, raw)
    cfg.server = from_dict(ServerConfig, server_raw, path="server")
    if env_secrets:
        cfg.server = cfg.server.with_env_secrets()
        cfg.server.validate()
    if (cfg.checkpoint is None) == (cfg.policy is None):
        raise ConfigError(
            "give exactly one of --checkpoint PATH (or 'checkpoint:' in the config) "
            "and a 'policy: {name, spec, kwargs}' section"
        )
    return cfg


def load_served_policy(cfg: ServeConfig) -> tuple[Any, int, str]:
    """(served policy, weight_version, name) from a checkpoint or a ``policy:`` section."""
    from learner.serving import TorchPolicy, load_served_checkpoint
    from rlinf_contracts.config import ConfigError

    det, threads = cfg.server.deterministic, cfg.server.torch_threads
    if cfg.checkpoint is not None:
        served, version = load_served_checkpoint(cfg.checkpoint, cfg.device, det, threads)
        log.info("serving %s: %s", cfg.checkpoint, served.robot_spec.describe())
        return served, version, served.name
    from learner.models import PolicySpec, build_policy

    assert cfg.policy is not None
    try:
        spec = PolicySpec.from_dict(cfg.policy.spec)
    except TypeError as e:
        raise ConfigError(
            f"key 'policy.spec' is not a valid PolicySpec ({e}); "
            f"fields: {', '.join(f.name for f in dataclasses.fields(PolicySpec))}"
        ) from None
    model = build_policy(cfg.policy.name, spec, **cfg.policy.kwargs).to(cfg.device)
    return TorchPolicy(model, det, threads), 0, cfg.policy.name


def is_llm_checkpoint(path: str) -> bool:
    """An LLM actor's checkpoint (``runner: reasoning``): served as text completions."""
    from learner.checkpoint import read_meta

    return (read_meta(path)[1].get("model") or {}).get("name") == "causal_lm"


def run(args: argparse.Namespace) -> int:
    from policy_server.server import PolicyServer
    from rlinf_cli.preflight import check_listen_port, serve_port

    cfg = build_config(args)
    check_listen_port(serve_port(cfg.server))  # before the model loads, not after
    if cfg.checkpoint is not None and is_llm_checkpoint(cfg.checkpoint):
        from learner.llm.completions import serve_completions

        srv = cfg.server
        return serve_completions(
            cfg.checkpoint, srv.host, srv.port, srv.api_key, cfg.device, exposed=srv.exposed
        )
    policy, version, name = load_served_policy(cfg)
    server = PolicyServer(policy, cfg.server, weight_version=version, policy_name=name)
    if cfg.server.weights_token is None:
        log.info("no weights token configured: weight pushes on /weights will be refused")
    asyncio.run(serve_until_signal(server))
    return 0


async def serve_until_signal(server: Any) -> None:
    """Serve until SIGINT / SIGTERM, then stop within a bounded time.

    Why our own handlers: a KeyboardInterrupt raised wherever the loop happens to be (inside a
    websocket close, a thread hand-off) can leave shutdown waiting forever; a flag set by the
    signal and one awaited ``stop`` (with a timeout) cannot."""
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    await stop.wait()
    log.info("signal received; stopping the policy server")
    try:
        await asyncio.wait_for(server.stop(), timeout=10.0)
    except TimeoutError:
        log.warning("policy server did not stop within 10 s; exiting anyway")
    log.info("interrupted; server stopped")
