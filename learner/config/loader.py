"""Load a YAML config, apply ``key=value`` overrides, resolve interpolations.

Overrides use OmegaConf's dotlist grammar (``actor.lr=3e-4``, ``placement.env=0-1``) with YAML
value parsing, so ``x=3`` is an int and ``x=[1,2]`` a list. ``+key=value`` adds a key the file
does not have (it is still checked against the schema during validation).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from learner.config.errors import ConfigError

__all__ = ["ConfigError", "load_config", "parse_overrides"]


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    bad = [o for o in overrides if "=" not in o or o.startswith("=")]
    if bad:
        raise ConfigError(f"overrides must look like key=value, got: {' '.join(bad)}")
    cleaned = [o[1:] if o.startswith("+") else o for o in overrides]
    try:
        return OmegaConf.to_container(OmegaConf.from_dotlist(cleaned), resolve=False)  # type: ignore[return-value]
    except OmegaConfBaseException as e:
        raise ConfigError(f"cannot parse overrides {overrides}: {e}") from None


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> dict[str, Any]:
    """YAML file (optional) + overrides -> plain resolved dict, ready for ``from_dict``."""
    base = OmegaConf.create({})
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        try:
            base = OmegaConf.load(p)
        except Exception as e:  # yaml errors carry line numbers; keep them
            raise ConfigError(f"cannot parse {p}: {e}") from None
    try:
        merged = OmegaConf.merge(base, OmegaConf.create(parse_overrides(overrides or [])))
        out = OmegaConf.to_container(merged, resolve=True)
    except OmegaConfBaseException as e:
        raise ConfigError(f"bad config {path}: {e}") from None
    if not isinstance(out, dict):
        raise ConfigError(f"config {path} must be a mapping at the top level")
    return out  # type: ignore[return-value]
