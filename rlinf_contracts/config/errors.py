class ConfigError(ValueError):
    """A config problem; the message names the offending key and what was expected."""
