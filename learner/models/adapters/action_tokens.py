"""OpenVLA's action tokens: 256 uniform bins over [-1, 1] on the last vocabulary ids (numpy only).

What the released OpenVLA checkpoints do (restated, checked against the openvla repository):
``bins = linspace(-1, 1, 256)`` are bin *edges*, so there are 255 bin centres
``(bins[:-1] + bins[1:]) / 2``. Encoding clips to [-1, 1] and takes ``digitize(a, bins)``
(1..256; exactly 1.0 lands in 256); the token id is ``vocab_size - digitized`` where
``vocab_size`` is the *tokenizer's* size (32000 for Llama 2, not the model's padded 32064), so
action tokens are ids ``vocab_size - 256 .. vocab_size - 1``. Decoding inverts that and clamps
to the 255 centres: ``centres[clip(vocab_size - id - 1, 0, 254)]``.

>>> tok = ActionTokenizer(vocab_size=32000)
>>> tok.encode(np.array([-1.0, 0.0, 1.0])).tolist()
[31999, 31872, 31744]
>>> tok.decode(np.array([31999, 31872, 31744])).round(4).tolist()
[-0.9961, 0.0, 0.9961]
"""

from __future__ import annotations

import numpy as np


class ActionTokenizer:
    """Continuous actions in [-1, 1] <-> token ids at the end of the vocabulary."""

    def __init__(
        self, vocab_size: int = 32000, n_bins: int = 256, low: float = -1.0, high: float = 1.0
    ) -> None:
        if vocab_size <= n_bins:
            raise ValueError(f"vocab_size {vocab_size} must exceed n_bins {n_bins}")
        self.vocab_size, self.n_bins = int(vocab_size), int(n_bins)
        self.low, self.high = float(low), float(high)
        self.bins = np.linspace(low, high, n_bins)
        self.centres = (self.bins[:-1] + self.bins[1:]) / 2.0

    @property
    def first_id(self) -> int:
        """Smallest action token id (the range is ``first_id .. vocab_size - 1``)."""
        return self.vocab_size - self.n_bins

    def encode(self, actions: np.ndarray) -> np.ndarray:
        """Actions ``[..., A]`` -> token ids ``[..., A]`` (int64)."""
        a = np.clip(np.asarray(actions, dtype=np.float64), self.low, self.high)
        return (self.vocab_size - np.digitize(a, self.bins)).astype(np.int64)

    def decode(self, token_ids: np.ndarray) -> np.ndarray:
        """Token ids ``[..., A]`` -> actions (bin centres), ids outside the range clamped."""
        idx = np.clip(
            self.vocab_size - np.asarray(token_ids, dtype=np.int64) - 1, 0, len(self.centres) - 1
        )
        return self.centres[idx]

    def bin_index(self, token_ids: np.ndarray) -> np.ndarray:
        """Token ids -> 0-based index among the ``n_bins`` action tokens (for a restricted
        softmax)."""
        return np.asarray(token_ids, dtype=np.int64) - self.first_id
