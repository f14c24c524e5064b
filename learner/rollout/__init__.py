"""Env rollout: env construction and stages, trajectories, env / rollout workers, the toy env."""
