"""An LLM checkpoint served as text completions: real HTTP on a free port, the training decoder.

The greedy answer over HTTP is the one :func:`learner.eval.llm.evaluate_llm_checkpoint`'s decode
gives; bad bodies and a missing key are refused with the field named, never a traceback.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from learner.llm.completions import CompletionEngine, make_server
from learner.llm.model import save_model
from learner.llm.rollout import ROLLOUT_BACKENDS, SamplingParams

KEY = "k" * 32


@pytest.fixture
def served(tiny_model, tiny_tok, tmp_path) -> Iterator[tuple[str, Any]]:
    path = save_model(
        tiny_model,
        tiny_tok,
        tmp_path / "run" / "checkpoints" / "iter_000003",
        iteration=3,
        weight_version=7,
        config={"runner": "reasoning"},
    )
    engine = CompletionEngine(path)
    server = make_server(engine, "127.0.0.1", 0, api_key=KEY)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", engine
    finally:
        server.shutdown()
        server.server_close()


def _call(url: str, body: Any = None, key: str | None = KEY) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="GET" if data is None else "POST")
    if key is not None:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_greedy_completion_is_the_training_decoders_answer(served, tiny_model, tiny_tok) -> None:
    url, engine = served
    status, out = _call(
        f"{url}/v1/completions", {"prompt": ["1+2=", "13+4="], "max_tokens": 4, "temperature": 0}
    )
    assert status == 200 and out["object"] == "text_completion"
    assert out["model"] == "run/iter_000003" and out["weight_version"] == 7
    want = ROLLOUT_BACKENDS.get("hf")(tiny_model, tiny_tok).generate(
        ["1+2=", "13+4="], SamplingParams(temperature=0.0, max_new_tokens=4)
    )
    assert [c["text"] for c in out["choices"]] == want.texts
    assert [c["index"] for c in out["choices"]] == [0, 1]
    assert out["usage"]["completion_tokens"] == want.num_tokens
    status, sampled = _call(
        f"{url}/v1/completions", {"prompt": "1+2=", "n": 3, "seed": 1, "max_tokens": 3}
    )
    assert status == 200 and len(sampled["choices"]) == 3


def test_health_models_and_refusals_name_the_field(served) -> None:
    url, _ = served
    assert _call(f"{url}/healthz", key=None) == (200, {"status": "ok", "weight_version": 7})
    status, models = _call(f"{url}/v1/models")
    assert status == 200 and models["data"][0]["id"] == "run/iter_000003"
    status, err = _call(f"{url}/v1/completions", {"prompt": "1+2="}, key=None)
    assert status == 401 and "Authorization" in err["error"]["message"]
    assert _call(f"{url}/v1/completions", {"prompt": "1+2="}, key="x" * 32)[0] == 401
    for body, field in (
        ({"prompt": 3}, "'prompt'"),
        ({"prompt": []}, "'prompt'"),
        ({"prompt": "a", "max_tokens": 0}, "'max_tokens'"),
        ({"prompt": "a", "temperature": -1}, "'temperature'"),
        ({"prompt": "a", "n": 1000}, "'n'"),
        ({"prompt": "a", "seed": "x"}, "'seed'"),
        ({"prompt": "a", "stop": 5}, "'stop'"),
        ([1, 2], "JSON object"),
    ):
        status, err = _call(f"{url}/v1/completions", body)
        assert status == 400 and field in err["error"]["message"], (body, err)
    assert _call(f"{url}/v1/chat", {"prompt": "a"})[0] == 404
