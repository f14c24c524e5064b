"""A tokenizer trained locally (no download): byte-pair encoding with single-digit tokens.

Why digits stay single tokens: a BPE merge such as ``"57"`` would give every number its own
opaque id, and a tiny model could no longer learn arithmetic digit by digit (this is also why
Llama / Qwen tokenizers split digits). Words and symbols still get BPE merges from the corpus.
The result is wrapped as a ``transformers.PreTrainedTokenizerFast`` so everything downstream
(rollout backends, chat templates, ``save_pretrained``) treats it like any HF tokenizer.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

__all__ = ["SPECIAL_TOKENS", "train_tokenizer", "load_tokenizer"]

SPECIAL_TOKENS = {
    "pad_token": "<pad>",
    "bos_token": "<s>",
    "eos_token": "</s>",
    "unk_token": "<unk>",
}

# A minimal chat template so ``prompt_format: chat`` works with the tiny tokenizer too.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def train_tokenizer(
    corpus: Iterable[str],
    vocab_size: int = 96,
    min_frequency: int = 2,
    extra_tokens: Iterable[str] = (),
) -> PreTrainedTokenizerFast:
    """Train a byte-level-free BPE on ``corpus`` (strings); digits are never merged.

    ``vocab_size`` counts special tokens and the initial alphabet; the trainer stops early
    when no pair reaches ``min_frequency``. ``extra_tokens`` (tool tags such as ``<calc>``)
    become single, *non-special* tokens: matched before pre-tokenization and kept when decoding.
    """
    tok = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.Split(" ", behavior="merged_with_next"),
            pre_tokenizers.Punctuation(behavior="isolated"),
        ]
    )
    tok.decoder = decoders.BPEDecoder()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS.values()),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL_TOKENS)
    fast.padding_side = "left"  # generation batches are left-padded
    fast.chat_template = CHAT_TEMPLATE
    extra = list(extra_tokens)
    if extra:
        fast.add_tokens(extra)
    return fast


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    """Load a tokenizer saved with ``save_pretrained`` (ours or any HF one), left padding."""
    from transformers import AutoTokenizer

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(
            f"tokenizer directory {p} does not exist; train one or set model.path"
        )
    tok = AutoTokenizer.from_pretrained(str(p))
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok
