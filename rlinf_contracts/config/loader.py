"""Load a YAML config, apply ``key=value`` overrides, resolve interpolations.

Overrides use a dotlist grammar with YAML value parsing (``actor.lr=3e-4``, ``x=[1,2]``). The
rules, the same for every command:

- ``a.b=v`` sets one entry; ``+a.b=v`` spells out that the key is new (both add it; schema
  validation still rejects a key that does not exist, with a suggestion).
- ``a={...}``, ``a=[...]``, ``a=null`` **replace** the value at ``a`` -- a mapping is never
  merged into the file's mapping, so ``placement={env: 0, rollout: 0, actor: 0}`` replaces the
  whole placement and ``policy_client.cameras={}`` empties the map.
- ``~a.b`` deletes the entry ``a.b``.
- Shared keys: in a mapping whose keys list several names (``"env,rollout,actor": "0"``), an
  override of one name takes it out of the shared key first, so ``placement.env=1`` re-splits
  the file's placement into ``{"rollout,actor": "0", "env": 1}`` instead of placing ``env``
  twice.

>>> cfg = {"placement": {"env,rollout,actor": "0"}, "cams": {"wrist": 1}}
>>> apply_overrides(cfg, ["placement.env=1", "cams={}"])
{'placement': {'rollout,actor': '0', 'env': 1}, 'cams': {}}
>>> apply_overrides(cfg, ["placement={actor: 0-1}", "~cams.wrist"])
{'placement': {'actor': '0-1'}, 'cams': {}}
>>> apply_overrides(cfg, ["~cams.front"])
Traceback (most recent call last):
...
rlinf_contracts.config.errors.ConfigError: cannot delete 'cams.front': no such key (keys there:
wrist)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlinf_contracts.config.errors import ConfigError

__all__ = ["ConfigError", "load_config", "parse_overrides", "apply_overrides"]


def _split_override(text: str) -> tuple[str, Any]:
    if "=" not in text or text.startswith("="):
        raise ConfigError(f"overrides must look like key=value (or ~key to delete), got: {text}")
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
                raise ConfigError(
                    f"override '{text}' conflicts with an earlier override of '{part}'"
                )
        node[parts[-1]] = value
    return out


def _resplit_shared(parent: Any, leaf: str) -> None:
    """Take the names of ``leaf`` (``env`` or ``env,rollout``) out of the parent's shared keys."""
    if not isinstance(parent, DictConfig):
        return
    names = {n.strip() for n in leaf.split(",")}
    for key in [k for k in parent.keys() if isinstance(k, str) and "," in k and k != leaf]:
        members = [n.strip() for n in key.split(",")]
        if not names & set(members):
            continue
        value = parent[key]
        rest = [m for m in members if m not in names]
        items = [
            (",".join(rest) if k == key else k, value if k == key else parent[k])
            for k in parent.keys()
            if rest or k != key
        ]
        for k in list(parent.keys()):
            del parent[k]
        for k, v in items:
            parent[k] = v


def _delete(base: DictConfig, key: str) -> None:
    parent_key, _, leaf = key.rpartition(".")
    parent = OmegaConf.select(base, parent_key) if parent_key else base
    if not isinstance(parent, DictConfig) or leaf not in parent:
        known = ", ".join(map(str, parent.keys())) if isinstance(parent, DictConfig) else "none"
        raise ConfigError(f"cannot delete '{key}': no such key (keys there: {known})")
    del parent[leaf]


def _apply_one(base: DictConfig, text: str) -> None:
    if text.startswith("~"):
        _delete(base, text[1:].strip())
        return
    key, value = _split_override(text)
    parent_key, _, leaf = key.rpartition(".")
    if parent_key:
        _resplit_shared(OmegaConf.select(base, parent_key, default=None), leaf)
    else:
        _resplit_shared(base, leaf)
    try:
        OmegaConf.update(base, key, value, merge=False, force_add=True)
    except (OmegaConfBaseException, TypeError, ValueError, IndexError) as e:
        raise ConfigError(f"cannot apply override '{text}': {e}") from None


def _resolved(base: DictConfig, where: Any) -> dict[str, Any]:
    try:
        out = OmegaConf.to_container(base, resolve=True)
    except OmegaConfBaseException as e:
        raise ConfigError(f"bad config {where}: {e}") from None
    if not isinstance(out, dict):
        raise ConfigError(f"config {where} must be a mapping at the top level")
    return out  # type: ignore[return-value]  # a dict of str keys: YAML mapping keys


def apply_overrides(config: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """A copy of the plain dict ``config`` with ``overrides`` applied (rules in the module doc)."""
    base = OmegaConf.create(config)
    for text in overrides:
        _apply_one(base, text)
    return _resolved(base, "(overrides)")


def _nearest_file(p: Path) -> str:
    """ "; did you mean DIR/NAME?" for a file beside ``p`` with a close name ("" when none):
    a config path is typed by hand, and a one-letter slip should not send the user to ``ls``."""
    import difflib

    try:
        names = [f.name for f in p.parent.iterdir() if f.is_file()]
    except OSError:
        return ""
    near = difflib.get_close_matches(p.name, names, n=1)
    return f"; did you mean {p.parent / near[0]}?" if near else ""


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> dict[str, Any]:
    """YAML file (optional) + overrides -> plain resolved dict, ready for ``from_dict``.

    Overrides may index lists (``cameras.0.fps=30``); a key the file lacks is added and then
    rejected (with a suggestion) by schema validation if it is not a real key.
    """
    base = OmegaConf.create({})
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}{_nearest_file(p)}")
        try:
            base = OmegaConf.load(p)
        except Exception as e:  # yaml errors carry line numbers; keep them
            raise ConfigError(f"cannot parse {p}: {e}") from None
    if not isinstance(base, DictConfig):
        raise ConfigError(f"config {path} must be a mapping at the top level")
    for text in overrides or []:
        _apply_one(base, text)
    return _resolved(base, path)
