"""The sections of an off-policy run fed by robots: ``ingest``, ``push`` and ``servers``.

``ingest`` (transitions in), ``push`` (weights out to the policy servers) and ``servers`` (how the
policy servers the run places itself serve), with the token checks they make before anything
starts.

Why apart from :mod:`learner.offpolicy.config`: these sections are the online loop's wiring
(addresses, tokens, rewards of streamed steps), read together by the remote learner and
``rlinf online``; the simulated runs never set them. ``OffPolicyConfig`` holds one of each.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from learner.sections import h as _h
from rlinf_contracts.config import ConfigError
from rlinf_contracts.wire import MIN_SECRET_CHARS

__all__ = ["IngestSection", "PushSection", "ServersSection"]


def _env_token(name: str) -> bool:
    return bool(os.environ.get(name) or os.environ.get(name + "_FILE"))


def _push_token(token_file: str | None) -> str:
    """The weights token as the push client (``policy_server.push.resolve_token``, which the learner
    may not import) will read it: ``token_file``, else ``RLINF_WEIGHTS_TOKEN_FILE``, else
    ``RLINF_WEIGHTS_TOKEN`` (surrounding whitespace stripped); "" when none is set."""
    path = token_file or os.environ.get("RLINF_WEIGHTS_TOKEN_FILE")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as e:
            raise ConfigError(
                f"key 'push.token_file': cannot read {path!r}: {e.strerror}"
            ) from None
    return os.environ.get("RLINF_WEIGHTS_TOKEN", "").strip()


@dataclass
class IngestSection:
    """Robots as the env (``learner.offpolicy.remote``): transitions arrive on the learner's
    ingest."""

    enabled: bool = field(
        default=False,
        metadata=_h(
            "learn from robots streaming to ws://host:port/transitions instead of stepping env "
            "(the 'remote' topology); env then only gives the spec and the final eval"
        ),
    )
    host: str = field(
        default="127.0.0.1",
        metadata=_h("bind address of the ingest (0.0.0.0 to accept robots on the network)"),
    )
    port: int = field(
        default=8100,
        metadata=_h(
            "ingest TCP port (0 picks a free one; the chosen URL is logged and written to "
            "<out_dir>/ingest.json)"
        ),
    )
    store: str | None = field(
        default=None,
        metadata=_h(
            "episode store the ingest writes before acking; null = train.episode_store or "
            "<out_dir>/episodes (keep it for train.resume)"
        ),
    )
    token_file: str | None = field(
        default=None,
        metadata=_h("file holding the robots' bearer token; null = RLINF_INGEST_TOKEN(_FILE)"),
    )
    wait_s: float = field(
        default=0.5,
        metadata=_h("how long the learner waits for transitions when it owes no update"),
    )
    pretrain_updates: int = field(
        default=0,
        metadata=_h(
            "updates on the demos alone before the first actor is written and served (0 = serve "
            "the initial actor)"
        ),
    )
    reward: str = field(
        default="stream",
        metadata=_h(
            "stream (the robot's reward: success flag of the judge / classifier / keys) | "
            "goal_distance (plus -|goal_minus_ee| of the next state, the simulator's reach reward; "
            "needs that state field) | push_distance (the simulator's push reward from "
            "object_minus_ee / goal_minus_object) | insert_depth (the simulator's peg-insertion "
            "reward from ee_pos / ee_rot6d / goal_pos)"
        ),
    )
    relabel_demos: bool = field(
        default=False,
        metadata=_h(
            "give train.demos the ingest.reward too (demos recorded on the robot carry its "
            "streamed reward; the online data gets ingest.reward)"
        ),
    )
    turn_items: int = field(
        default=16,
        metadata=_h(
            "most transitions of one robot stored per turn of the store writer before the other "
            "robots' batches get theirs (the fair drain; larger spreads each commit over more "
            "steps, docs/scaling.md)"
        ),
    )
    fsync: bool = field(
        default=False,
        metadata=_h(
            "flush each stored step to the disk before its ack (survives a power cut; costs ms "
            "per step, benchmarks/results/store_durability.md); off: survives kill -9 only"
        ),
    )
    process: bool = field(
        default=False,
        metadata=_h(
            "run the ingest (its event loop and store writer) in a process of its own, so it "
            "does not share the learner's interpreter lock: a learner fed by several robots "
            "trains on more of what they send (docs/scaling.md); off: embedded in the learner"
        ),
    )

    def validate(self) -> None:
        from learner.offpolicy.rewards import REWARDS

        if self.reward not in REWARDS.names():
            raise ConfigError(
                f"key 'ingest.reward'={self.reward!r} is unknown; choose one of "
                f"{sorted(REWARDS.names())}"
            )
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"key 'ingest.port' must be in [0, 65535], got {self.port}")
        if self.turn_items < 1:
            raise ConfigError(f"key 'ingest.turn_items' must be >= 1, got {self.turn_items}")
        if self.wait_s <= 0 or self.pretrain_updates < 0:
            raise ConfigError(
                f"keys 'ingest.wait_s' (> 0) / 'ingest.pretrain_updates' (>= 0) out of range: "
                f"{self.wait_s}, {self.pretrain_updates}"
            )
        if self.token_file is not None and not Path(self.token_file).is_file():
            raise ConfigError(f"key 'ingest.token_file': no such file {self.token_file!r}")
        if self.enabled and self.token_file is None and not _env_token("RLINF_INGEST_TOKEN"):
            raise ConfigError(
                "key 'ingest.token_file' is null and RLINF_INGEST_TOKEN(_FILE) is unset: robots "
                "authenticate with a bearer token"
            )


@dataclass
class PushSection:
    """Weights to a running policy server (``rlinf serve``) while the learner trains."""

    url: str = field(
        default="",
        metadata=_h(
            "policy server, e.g. ws://127.0.0.1:8000 ('' = no push); its /weights path needs the "
            "weights token"
        ),
    )
    urls: list[str] = field(
        default_factory=list,
        metadata=_h(
            "more policy servers, one per robot site: every push goes to push.url and to each of "
            "these, each from its own sender (a slow site delays only itself)"
        ),
    )
    every_updates: int = field(
        default=50,
        metadata=_h(
            "updates between two pushes (the newest weights win; the learner never waits for the "
            "server)"
        ),
    )
    token_file: str | None = field(
        default=None,
        metadata=_h("file holding the weights token; null = RLINF_WEIGHTS_TOKEN(_FILE)"),
    )
    timeout_s: float = field(default=30.0, metadata=_h("connect / ack timeout of one push"))

    @property
    def targets(self) -> list[str]:
        """Every policy server a push goes to: ``url`` first, then ``urls``."""
        return ([self.url] if self.url else []) + list(self.urls)

    def validate(self) -> None:
        if self.url and not self.url.startswith(("ws://", "wss://")):
            raise ConfigError(f"key 'push.url' must be a ws:// or wss:// URL, got {self.url!r}")
        bad = [u for u in self.urls if not str(u).startswith(("ws://", "wss://"))]
        if bad:
            raise ConfigError(f"key 'push.urls': each must be a ws:// or wss:// URL, got {bad}")
        twice = sorted({u for u in self.targets if self.targets.count(u) > 1})
        if twice:
            raise ConfigError(
                f"keys 'push.url' / 'push.urls' name {twice} more than once: one sender per server"
            )
        if self.every_updates < 1 or self.timeout_s <= 0:
            raise ConfigError(
                f"keys 'push.every_updates' (>= 1) / 'push.timeout_s' (> 0) out of range: "
                f"{self.every_updates}, {self.timeout_s}"
            )
        if self.token_file is not None and not Path(self.token_file).is_file():
            raise ConfigError(f"key 'push.token_file': no such file {self.token_file!r}")
        if self.targets:
            self.check_token()

    def check_token(self) -> None:
        """The weights token the pushes (and placed policy servers) will use is set and long
        enough; checked wherever a push will happen."""
        token = _push_token(self.token_file)
        if token == "" and self.token_file is None:
            raise ConfigError(
                "key 'push.token_file' is null and RLINF_WEIGHTS_TOKEN(_FILE) is unset: the policy "
                "server refuses pushes without its weights token"
            )
        if len(token) < MIN_SECRET_CHARS:
            raise ConfigError(
                "key 'push.token_file': the weights token "
                f"({self.token_file or 'RLINF_WEIGHTS_TOKEN(_FILE)'}) is shorter than "
                f"{MIN_SECRET_CHARS} characters; the policy server refuses such a token, so no "
                "push would land"
            )

    def token(self) -> str:
        """The weights token, read as the push client reads it ("" when none is set)."""
        return _push_token(self.token_file)


@dataclass
class ServersSection:
    """How the policy servers the run starts itself serve (placement component ``server``,
    ``learner.offpolicy.servers``): one per slot, on that slot's node, pushed to like
    ``push.urls``."""

    host: str = field(
        default="",
        metadata=_h(
            "interface each placed server binds; '' = its node's IP address, which its URL names "
            "(0.0.0.0: every interface, the URL still names the node's IP)"
        ),
    )
    port: int = field(
        default=0,
        metadata=_h(
            "TCP port of each placed server (0 = a free one); the URLs are logged and written to "
            "<out_dir>/ingest.json"
        ),
    )
    deterministic: bool = field(
        default=False,
        metadata=_h(
            "serve the policy's mode (true) or sample its actions (false: the exploration the "
            "robots' online data needs, as 'rlinf serve ... server.deterministic=false')"
        ),
    )

    def validate(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"key 'servers.port' must be in [0, 65535], got {self.port}")
        if any(c.isspace() for c in self.host):
            raise ConfigError(f"key 'servers.host' must be an address or '', got {self.host!r}")
