"""Rollout backends behind one interface: ``hf`` (CPU-capable), ``vllm`` and ``sglang`` (GPU).

Backends register in :data:`ROLLOUT_BACKENDS`; ``rollout.backend: hf`` in a config picks one.
The GPU adapters import their engines lazily, so this package imports on any machine.
"""

from learner.llm.rollout import hf as _hf  # noqa: F401  (registers "hf")
from learner.llm.rollout import sglang_backend as _sglang  # noqa: F401  (registers "sglang"; lazy import)
from learner.llm.rollout import vllm_backend as _vllm  # noqa: F401  (registers "vllm"; lazy import)
from learner.llm.rollout.base import ROLLOUT_BACKENDS, RolloutBackend, RolloutBatch, SamplingParams

__all__ = ["ROLLOUT_BACKENDS", "RolloutBackend", "RolloutBatch", "SamplingParams"]
