"""Load a YAML config, apply ``key=value`` overrides, resolve interpolations.

Overrides use OmegaConf's dotlist grammar (``actor.lr=3e-4``, ``placement.env=0-1``) with YAML
value parsing, so ``x=3`` is an int and ``x=[1,2]`` a list. ``+key=value`` adds a key the file
does not have (it is still checked against the schema during validation).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlinf_contracts.config.errors import ConfigError

__all__ = ["ConfigError", "load_config", "parse_overrides"]


def _split_override(text: str) -> tuple[str, Any]:
    if "=" not in text or text.startswith("="):
        raise ConfigError(f"overrides must look like key=value, got: {text}")
    key, _, raw = text.partition("=")
    key = key[1:] if key.startswith("+") else key
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"cannot parse the value of override '{text}': {e}") from None
    return key.strip(), value


def parse_overrides(overrides: list[str]) -> dict[str, Any]:
    """``["a.b=1", "c=[1,2]"]`` -> ``{"a": {"b": 1}, "c": [1, 2]}`` (values parsed as YAML)."""
    out: dict[str, Any] = {}
    for text in overrides:
        key, value = _split_override(text)
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override '{text}' conflicts with an earlier override of '{part}'")
        node[parts[-1]] = value
    return out


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> dict[str, Any]:
    """YAML file (optional) + overrides -> plain resolved dict, ready for ``from_dict``.

    Overrides may index lists (``cameras.0.fps=30``); a key the file lacks is added and then
    rejected (with a suggestion) by schema validation if it is not a real key.
    """
    base = OmegaConf.create({})
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        try:
            base = OmegaConf.load(p)
        except Exception as e:  # yaml errors carry line numbers; keep them
            raise ConfigError(f"cannot parse {p}: {e}") from None
    for text in overrides or []:
        key, value = _split_override(text)
        try:
            OmegaConf.update(base, key, value, merge=True, force_add=True)
        except (OmegaConfBaseException, TypeError, ValueError, IndexError) as e:
            raise ConfigError(f"cannot apply override '{text}': {e}") from None
    try:
        out = OmegaConf.to_container(base, resolve=True)
    except OmegaConfBaseException as e:
        raise ConfigError(f"bad config {path}: {e}") from None
    if not isinstance(out, dict):
        raise ConfigError(f"config {path} must be a mapping at the top level")
    return out  # type: ignore[return-value]
