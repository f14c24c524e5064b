"""Typed configs: YAML (OmegaConf) + ``key=value`` overrides, validated once into dataclasses."""

from rlinf_contracts.config.errors import ConfigError
from rlinf_contracts.config.loader import apply_overrides, load_config, parse_overrides
from rlinf_contracts.config.typed import from_dict, help_text, to_dict

__all__ = [
    "ConfigError",
    "load_config",
    "parse_overrides",
    "apply_overrides",
    "from_dict",
    "to_dict",
    "help_text",
]
