"""LLM reasoning RL on the shared learner: tokenizer, tiny model, datasets, rollout, rewards.

Importing this package is cheap; torch / transformers load only when a submodule that needs
them is imported.
"""
