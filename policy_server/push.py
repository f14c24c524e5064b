"""Learner -> policy server weight push over the wire (``/weights``, shared-token auth).

The learner calls :func:`push_weights` (one shot) or keeps a :class:`WeightPusher` open across
iterations. The server applies the weights between two batches and answers with a
:class:`~policy_server.messages.WeightAck` once the new version is serving.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import websockets

from policy_server.client import open_sync
from policy_server.config import WEIGHTS_TOKEN_ENV
from policy_server.messages import ServerMetadata, WeightAck, WeightPush
from rlinf_contracts.wire import packb, unpackb

log = logging.getLogger(__name__)


class WeightPushError(RuntimeError):
    """The server refused the push (auth, stale version, weights that do not fit) or is unreachable."""


def weights_url(url: str) -> str:
    """``ws://host:port`` or ``ws://host:port/`` -> ``ws://host:port/weights``.

    >>> weights_url("ws://10.0.0.2:8000/")
    'ws://10.0.0.2:8000/weights'
    """
    url = url.rstrip("/")
    return url if url.endswith("/weights") else url + "/weights"


def _to_bytes(weights: Any) -> bytes:
    """safetensors bytes as given, or a state dict of torch tensors / numpy arrays serialised.

    Tensors become numpy through their own methods, so this module never imports torch."""
    if isinstance(weights, (bytes, bytearray)):
        return bytes(weights)
    import numpy as np
    from safetensors.numpy import save

    def as_numpy(v: Any) -> np.ndarray:
        if hasattr(v, "detach"):  # a torch tensor
            v = v.detach().cpu().contiguous().numpy()
        return np.ascontiguousarray(v)

    return save({k: as_numpy(v) for k, v in weights.items()})


class WeightPusher:
    """A persistent authenticated connection to a server's ``/weights`` path."""

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 120.0) -> None:
        token = token or os.environ.get(WEIGHTS_TOKEN_ENV)
        if not token:
            raise WeightPushError(f"no weights token: pass token=... or set {WEIGHTS_TOKEN_ENV}")
        self.url, self.timeout_s = weights_url(url), timeout_s
        try:
            self._ws = open_sync(
                self.url, open_timeout=timeout_s, additional_headers={"Authorization": f"Bearer {token}"},
                max_size=None, compression=None,
            )
        except websockets.InvalidStatus as e:
            body = (e.response.body or b"").decode(errors="replace").strip()
            raise WeightPushError(f"{self.url} refused the push connection: HTTP {e.response.status_code} {body}") from None
        except (OSError, TimeoutError, websockets.InvalidHandshake) as e:
            raise WeightPushError(f"cannot reach policy server at {self.url}: {e}") from None
        self.metadata = ServerMetadata.from_wire(unpackb(self._ws.recv(timeout=timeout_s)))

    def push(self, weights: Any, version: int | None = None) -> WeightAck:
        """Send a state dict (or safetensors bytes); returns once the version is serving."""
        frame = packb(WeightPush(data=_to_bytes(weights), version=version).to_wire())
        try:
            self._ws.send(frame)
            reply = self._ws.recv(timeout=self.timeout_s)
        except (websockets.ConnectionClosed, TimeoutError) as e:
            raise WeightPushError(f"weight push to {self.url} got no ack: {e}") from None
        if isinstance(reply, str):
            raise WeightPushError(reply)
        ack = WeightAck.from_wire(unpackb(reply))
        log.info("pushed weight version %d to %s (load %.1f ms)", ack.version, self.url, ack.load_ms)
        return ack

    def close(self) -> None:
        self._ws.close()

    def __enter__(self) -> "WeightPusher":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def push_weights(
    url: str, weights: Any, *, version: int | None = None, token: str | None = None, timeout_s: float = 120.0
) -> WeightAck:
    """One-shot push of a state dict (or safetensors bytes) to the server at ``url``."""
    with WeightPusher(url, token=token, timeout_s=timeout_s) as pusher:
        return pusher.push(weights, version=version)
