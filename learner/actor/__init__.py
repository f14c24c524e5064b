"""Training side of the embodied runner: PPO / GRPO updates, gradient sync, the actor worker."""
