"""Rollout: the env and rollout roles of every on-policy runner, and the embodied env side."""
