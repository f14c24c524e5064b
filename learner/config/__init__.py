"""Typed configs: YAML (OmegaConf) + ``key=value`` overrides, validated once into dataclasses."""

from learner.config.errors import ConfigError
from learner.config.loader import load_config, parse_overrides
from learner.config.typed import from_dict, help_text, to_dict

__all__ = ["ConfigError", "load_config", "parse_overrides", "from_dict", "to_dict", "help_text"]
