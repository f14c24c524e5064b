"""Secrets of the node graph (policy server API key, ingest token): from a file or the environment.

Why never a ROS parameter or a command-line argument: anyone on the ROS domain reads a parameter
back (``ros2 param get``, the node's ``get_parameters`` service) and every user of the machine
reads a process's argv (``ps``, ``/proc/<pid>/cmdline``). So a config names *where* a secret is
(``api_key_file: /run/secrets/api_key``, ``api_key_env: RLINF_API_KEY``), the node reads it at
start, and ``rlinf ros up`` hands it to its children by inheriting the environment.

:func:`is_secret` is the one rule that keeps secret-named leaves out of ROS parameters
(``rlinf_ros.nodes.common.declare_config``, the launch files) and out of ``key=value`` overrides.

>>> [is_secret(k) for k in ("api_key", "stream.token", "api_key_file", "max_new_tokens")]
[True, True, False, False]
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from rlinf_contracts.config import ConfigError

FILE_SUFFIX = "_FILE"  # RLINF_API_KEY_FILE=/run/secrets/api_key
_SECRET_LEAF = re.compile(r"(?:^|_)(?:api_key|token|password|secret)$")


def is_secret(name: str) -> bool:
    """Whether a config leaf (dotted name, last part decides) holds a secret value itself."""
    return bool(_SECRET_LEAF.search(name.rsplit(".", 1)[-1]))


def read_secret(key: str, path: str, env: str) -> str | None:
    """The secret from ``path`` (the file key's value), else the file named by ``$<env>_FILE``,
    else ``$<env>``; ``None`` if none is set. ``key`` names the config key in errors.

    >>> os.environ["DOCTEST_KEY"] = "k-123"
    >>> read_secret("policy_client.api_key_file", "", "DOCTEST_KEY")
    'k-123'
    >>> del os.environ["DOCTEST_KEY"]
    >>> read_secret("policy_client.api_key_file", "/nonexistent/key", "RLINF_API_KEY")
    Traceback (most recent call last):
    ...
    rlinf_contracts.config.errors.ConfigError: key 'policy_client.api_key_file': cannot read
    '/nonexistent/key' (No such file or directory)
    """
    path = path or (os.environ.get(env + FILE_SUFFIX, "") if env else "")
    if path:
        try:
            return Path(path).expanduser().read_text().strip() or None
        except OSError as e:
            where = key if path else f"${env}{FILE_SUFFIX}"
            raise ConfigError(f"key '{where}': cannot read {path!r} ({e.strerror})") from None
    return (os.environ.get(env) if env else None) or None


def reject_literal(key: str, value: str, file_key: str, env_key: str, env_default: str) -> None:
    """A literal secret in the config is an error that names the key and what to use instead
    (never the value)."""
    if value:
        raise ConfigError(
            f"key '{key}' holds a literal secret; secrets never go into the graph config, "
            "ROS parameters or the command line (`ros2 param get` and `ps` show them). Put "
            f"it in a file and set '{file_key}', or in an environment variable named by "
            f"'{env_key}' (default {env_default}, or {env_default}{FILE_SUFFIX} naming a "
            "file)"
        )


def reject_secret_overrides(overrides: list[str] | None) -> None:
    """``key=value`` overrides travel on argv (``rlinf ros up`` passes them to every node): a
    secret there is an error that names the key."""
    for text in overrides or []:
        key = text.split("=", 1)[0].lstrip("+~")
        if "=" in text and is_secret(key):
            raise ConfigError(
                f"override '{key}=...' puts a secret on the command line, where every user "
                "of the machine reads it (`ps`); name a file or an environment variable in "
                "the YAML instead (policy_client.api_key_file / api_key_env, "
                "streamer.token_file / token_env) and export that variable"
            )
