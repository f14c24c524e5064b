"""``rlinf serve`` for an LLM checkpoint: text completions over HTTP in the OpenAI shape.

Why this shape and not the policy server's websocket wire: an LLM actor answers text prompts,
not robot observations, and the clients a reasoning model meets (an agent loop, an eval
harness, ``curl``) already speak ``POST /v1/completions``. Why in the project and not only
``vllm serve DIR``: the checkpoint directory is a Hugging Face one that vllm / sglang serve as
it is, but neither runs on a CPU-only laptop; this server does, with the same decode loop the
``hf`` rollout backend trains with (:class:`learner.llm.rollout.hf.HFRolloutBackend`).

Routes: ``GET /healthz``, ``GET /v1/models``, ``POST /v1/completions`` (``prompt``: a string or
a list of them; ``max_tokens``, ``temperature`` (0: greedy), ``top_p``, ``n``, ``seed``,
``stop``). Requests are answered one at a time: the model is one CPU / GPU forward path, and a
tiny model answers in milliseconds. With an API key every route but ``/healthz`` needs
``Authorization: Bearer <key>`` (or ``Api-Key <key>``, as the policy server takes it).
"""

from __future__ import annotations

import hmac
import json
import logging
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["CompletionEngine", "CompletionRequest", "make_server", "serve_completions"]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1 << 20  # prompts are text: 1 MiB is far past any tiny model's context
MAX_PROMPTS = 64  # prompts x n per request (one batched decode)


class RequestError(ValueError):
    """A request the server refuses; the message names the field (HTTP 400)."""


def _number(body: dict[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise RequestError(f"'{key}' must be a number in [{lo}, {hi}], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class CompletionRequest:
    """A parsed ``POST /v1/completions`` body."""

    prompts: tuple[str, ...]
    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    n: int = 1
    seed: int | None = None
    stop: tuple[str, ...] = ()

    @classmethod
    def parse(cls, body: Any, max_tokens_limit: int) -> CompletionRequest:
        """Check every field; a :class:`RequestError` names the first one that is wrong."""
        if not isinstance(body, dict):
            raise RequestError("the body must be a JSON object with a 'prompt'")
        prompt = body.get("prompt")
        prompts = [prompt] if isinstance(prompt, str) else prompt
        if (
            not isinstance(prompts, list)
            or not prompts
            or not all(isinstance(p, str) for p in prompts)
        ):
            raise RequestError("'prompt' must be a string or a non-empty list of strings")
        n = int(_number(body, "n", 1, 1, MAX_PROMPTS))
        if len(prompts) * n > MAX_PROMPTS:
            raise RequestError(f"{len(prompts)} prompts x n={n} is over {MAX_PROMPTS} per request")
        stop = body.get("stop") or ()
        stop = (stop,) if isinstance(stop, str) else stop
        if not isinstance(stop, list | tuple) or not all(isinstance(s, str) for s in stop):
            raise RequestError("'stop' must be a string or a list of strings")
        seed = body.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise RequestError(f"'seed' must be an integer, got {seed!r}")
        return cls(
            prompts=tuple(prompts),
            max_tokens=int(_number(body, "max_tokens", 16, 1, max_tokens_limit)),
            temperature=_number(body, "temperature", 1.0, 0.0, 10.0),
            top_p=_number(body, "top_p", 1.0, 1e-6, 1.0),
            n=n,
            seed=seed,
            stop=tuple(stop),
        )


class CompletionEngine:
    """A causal-LM checkpoint loaded once, answering completion requests in turn."""

    def __init__(self, path: str | Path, device: str = "cpu", max_tokens_limit: int = 512) -> None:
        from learner.checkpoint import read_meta
        from learner.llm.model import load_model
        from learner.llm.rollout import ROLLOUT_BACKENDS

        self.path, meta = read_meta(path)
        self.weight_version = int(meta.get("weight_version", 0))
        self.name = f"{self.path.parent.parent.name}/{self.path.name}"
        model, self.tokenizer = load_model(self.path)
        self.backend = ROLLOUT_BACKENDS.get("hf")(model, self.tokenizer, device=device)
        self.max_tokens_limit = max_tokens_limit
        self._lock = threading.Lock()

    def complete(self, req: CompletionRequest) -> dict[str, Any]:
        """The OpenAI ``text_completion`` object for ``req``."""
        from learner.llm.rollout import SamplingParams

        params = SamplingParams(
            n=req.n,
            temperature=req.temperature,
            top_p=req.top_p,
            max_new_tokens=req.max_tokens,
            seed=req.seed,
            stop=req.stop,
        )
        with self._lock:
            out = self.backend.generate(list(req.prompts), params)
        prompt_tokens = sum(len(out.prompt_ids[i]) for i in range(0, len(out), req.n))
        return {
            "id": f"cmpl-{uuid.uuid4().hex[:24]}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": self.name,
            "weight_version": self.weight_version,
            "choices": [
                {"index": i, "text": text, "finish_reason": reason, "logprobs": None}
                for i, (text, reason) in enumerate(zip(out.texts, out.finish_reasons))
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": out.num_tokens,
                "total_tokens": prompt_tokens + out.num_tokens,
            },
        }


def _authorised(header: str | None, api_key: str | None) -> bool:
    if api_key is None:
        return True
    scheme, _, given = (header or "").partition(" ")
    return scheme in ("Bearer", "Api-Key") and hmac.compare_digest(given.strip(), api_key)


def make_server(
    engine: CompletionEngine, host: str, port: int, api_key: str | None = None
) -> ThreadingHTTPServer:
    """The HTTP server (not started); ``port`` 0 picks a free one (``server.server_port``)."""

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, kind: str) -> None:
            self._send(status, {"error": {"message": message, "type": kind}})

        def _gate(self) -> bool:
            if _authorised(self.headers.get("Authorization"), api_key):
                return True
            self._error(401, "missing or wrong 'Authorization: Bearer <key>'", "auth_error")
            return False

        def do_GET(self) -> None:
            if self.path == "/healthz":
                self._send(200, {"status": "ok", "weight_version": engine.weight_version})
            elif self.path != "/v1/models":
                self._error(404, f"no route {self.path}; POST /v1/completions", "not_found")
            elif self._gate():
                self._send(
                    200, {"object": "list", "data": [{"id": engine.name, "object": "model"}]}
                )

        def do_POST(self) -> None:
            if self.path != "/v1/completions":
                self._error(404, f"no route {self.path}; POST /v1/completions", "not_found")
                return
            if not self._gate():
                return
            size = int(self.headers.get("Content-Length") or 0)
            if size > MAX_BODY_BYTES:
                self._error(413, f"body of {size} bytes is over {MAX_BODY_BYTES}", "too_large")
                return
            try:
                body = json.loads(self.rfile.read(size) or b"null")
                req = CompletionRequest.parse(body, engine.max_tokens_limit)
            except (json.JSONDecodeError, UnicodeDecodeError):
                self._error(400, "the body is not JSON", "invalid_request_error")
                return
            except RequestError as e:
                self._error(400, str(e), "invalid_request_error")
                return
            self._send(200, engine.complete(req))

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s %s", self.address_string(), format % args)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def serve_completions(
    path: str | Path,
    host: str,
    port: int,
    api_key: str | None = None,
    device: str = "cpu",
    exposed: bool = False,
) -> int:
    """Serve ``path`` until SIGINT / SIGTERM; 0 on a requested stop (as ``rlinf serve`` does).
    ``exposed``: ``host`` reaches beyond loopback (a missing key is then warned about)."""
    engine = CompletionEngine(path, device=device)
    server = make_server(engine, host, port, api_key)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    thread = threading.Thread(target=server.serve_forever, name="completions", daemon=True)
    thread.start()
    log.info(
        "serving %s (weight version %d) on http://%s:%d/v1/completions (API key %s)",
        engine.path,
        engine.weight_version,
        host,
        server.server_port,
        "required" if api_key else "not set",
    )
    if exposed and api_key is None:
        log.warning(
            "completions server bound to %s with no API key: anyone who can reach port %d can "
            "run the model; set RLINF_API_KEY or RLINF_API_KEY_FILE, or bind 127.0.0.1",
            host,
            server.server_port,
        )
    stop.wait()
    log.info("signal received; stopping the completions server")
    server.shutdown()
    server.server_close()
    return 0
