"""Evaluation of trained policies (held-out seeds, OOD splits, videos)."""
