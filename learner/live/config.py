"""The ``live`` config section: where the live view listens, its token, how often it snapshots.

Why a section of its own: the view is optional and independent of the ingest's port (the ingest
may face the robots' network while the view stays on loopback). The token follows the ingest's
rules so there is one secret to manage: ``live.token_file``, else the ingest's token
(``ingest.token_file``, else ``RLINF_INGEST_TOKEN_FILE``, else ``RLINF_INGEST_TOKEN``) -- whoever
may stream transitions may watch them.

>>> LiveSection(snapshot_every_s=0).validate()
Traceback (most recent call last):
...
rlinf_contracts.config.errors.ConfigError: key 'live.snapshot_every_s' must be > 0, got 0
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from learner.sections import h as _h
from rlinf_contracts.config import ConfigError

TOKEN_ENV = "RLINF_INGEST_TOKEN"  # the ingest's (rlinf_data.ingest.TOKEN_ENV): one secret


@dataclass
class LiveSection:
    """A local web page of the running learner (robots, success, backlog, frames) + console line."""

    enabled: bool = field(
        default=False,
        metadata=_h(
            "serve the live view (http://host:port/) and write <out_dir>/live/index.html; "
            "ingesting runs only (ingest.enabled)"
        ),
    )
    host: str = field(
        default="127.0.0.1",
        metadata=_h("bind address of the live view (loopback: only this computer can open it)"),
    )
    port: int = field(
        default=8102, metadata=_h("TCP port of the live view; 0 picks a free one (it is logged)")
    )
    token_file: str | None = field(
        default=None,
        metadata=_h(
            "file holding the view's token (?token= or 'Authorization: Bearer'); null = the "
            "ingest's token (ingest.token_file, else RLINF_INGEST_TOKEN(_FILE))"
        ),
    )
    snapshot_every_s: float = field(
        default=10.0,
        metadata=_h("seconds between two snapshots written to <out_dir>/live (and one at the end)"),
    )
    console_every_s: float = field(
        default=5.0,
        metadata=_h("at most one console line per this many seconds, only when it changed"),
    )
    recent_episodes: int = field(
        default=20, metadata=_h("episodes listed one by one on the page (newest first)")
    )

    def validate(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"key 'live.port' must be in [0, 65535], got {self.port}")
        for key in ("snapshot_every_s", "console_every_s"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"key 'live.{key}' must be > 0, got {getattr(self, key)}")
        if self.recent_episodes < 1:
            raise ConfigError(
                f"key 'live.recent_episodes' must be >= 1, got {self.recent_episodes}"
            )
        if self.token_file is not None and not Path(self.token_file).is_file():
            raise ConfigError(f"key 'live.token_file': no such file {self.token_file!r}")


def resolve_token(live_token_file: str | None, ingest_token_file: str | None) -> str:
    """The view's token by the rules of the module docstring; a clear error when there is none."""
    path = live_token_file or ingest_token_file or os.environ.get(TOKEN_ENV + "_FILE")
    key = "live.token_file" if live_token_file else "ingest.token_file"
    if path:
        try:
            token = Path(path).read_text().strip()
        except OSError as e:
            raise ConfigError(f"key '{key}': cannot read {path!r}: {e.strerror}") from None
    else:
        token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise ConfigError(
            f"key 'live.token_file': no token for the live view (live.token_file, "
            f"ingest.token_file and {TOKEN_ENV}(_FILE) are all empty)"
        )
    return token
