"""`ConfigError`: a config problem; the message names the offending key."""


class ConfigError(ValueError):
    """A config problem; the message names the offending key and what was expected."""
