"""Token files created on first use in a per-user secrets directory.

Why: the online loop needs two shared secrets (the ingest token, the weights token) and the
nodes read them only from a file or an environment variable (``rlinf_ros.secrets``), never from
argv. ``rlinf online`` makes them itself instead of asking for two exported variables: each is a
file in ``$RLINF_SECRETS_DIR`` (default ``$XDG_CONFIG_HOME/rlinf/secrets`` or
``~/.config/rlinf/secrets``), the directory mode 0700, the file 0600, written once with
``O_EXCL`` (two starts at once never write two different tokens). A token's value is never
printed; :func:`copy_line` is the command that puts the same file on another machine.
"""

from __future__ import annotations

import os
import secrets
import shlex
from dataclasses import dataclass
from pathlib import Path

DIR_ENV = "RLINF_SECRETS_DIR"


@dataclass(frozen=True)
class TokenFile:
    """One token as a child process receives it: ``<env>_FILE=<path>``."""

    env: str  # RLINF_INGEST_TOKEN: the children get RLINF_INGEST_TOKEN_FILE
    path: Path
    created: bool = False  # made by this call (the peer does not have it yet)
    given: str = ""  # the variable the user already set instead ('' = our file)


def secrets_dir() -> Path:
    """Where tokens live: ``$RLINF_SECRETS_DIR``, else the per-user config directory."""
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "rlinf" / "secrets"


def token_file(env: str, name: str, create: bool = True) -> TokenFile:
    """The token for variable ``env``: the file or value the user already exported
    (``<env>_FILE`` / ``<env>``), else ``<secrets dir>/<name>``, made on first use."""
    for given in (f"{env}_FILE", env):
        if os.environ.get(given):
            path = Path(os.environ[given]) if given.endswith("_FILE") else Path()
            return TokenFile(env, path, given=given)
    directory = secrets_dir()
    path = directory / name
    if path.is_file() or not create:
        return TokenFile(env, path)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another start made it a moment ago: use that one
        return TokenFile(env, path)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(32) + "\n")
    return TokenFile(env, path, created=True)


def read_token(t: TokenFile) -> str | None:
    """The token's value as a child will read it (surrounding whitespace stripped); ``None`` for
    a file of ours not made yet (a dry run makes none). ``OSError`` when the file is unreadable."""
    if t.given and not t.given.endswith("_FILE"):
        return os.environ.get(t.given, "").strip()
    if not t.given and not t.path.is_file():
        return None
    return t.path.read_text().strip()


def child_env(tokens: list[TokenFile]) -> dict[str, str]:
    """The variables a child needs to read the tokens (file names only, never values)."""
    return {f"{t.env}_FILE": str(t.path) for t in tokens if not t.given}


def display(path: Path) -> str:
    """``~/...`` for a path under the home directory (the same text on the other machine)."""
    try:
        return "~/" + str(path.resolve().relative_to(Path.home().resolve()))
    except ValueError:
        return str(path)


def copy_line(path: Path, peer: str) -> str:
    """The command that copies the token file at ``path`` to the same place on ``peer``."""
    where = display(path)
    parent = where.rsplit("/", 1)[0]
    remote_dir = parent if where.startswith("~/") else shlex.quote(parent)
    remote = where if where.startswith("~/") else shlex.quote(where)
    return (
        f"ssh {peer} 'install -d -m 700 {remote_dir}' && "
        f"scp -p {shlex.quote(str(path))} {peer}:{remote}"
    )
