"""The actor role of every on-policy runner, and the embodied learner: PPO / GRPO, gradient sync."""
