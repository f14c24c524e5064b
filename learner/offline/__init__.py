"""Offline learning on the episode store: BC, IQL and DAgger (the sim oracle as expert)."""
