"""Build typed config dataclasses from plain dicts, with errors that name the key.

Why not OmegaConf structured configs alone: their errors do not suggest the nearest valid key,
and users mistype keys on the command line. This walker checks every key against the dataclass
fields, converts scalars where unambiguous (``"3"`` -> 3 only for ints from the CLI), and says
which key was wrong and what was expected.

>>> from dataclasses import dataclass, field
>>> @dataclass
... class Opt:
...     lr: float = field(default=1e-3, metadata={"help": "learning rate"})
...     epochs: int = 4
>>> from_dict(Opt, {"lr": 0.01})
Opt(lr=0.01, epochs=4)
>>> from_dict(Opt, {"ephocs": 3}, path="actor")
Traceback (most recent call last):
...
rlinf_contracts.config.errors.ConfigError: unknown key 'actor.ephocs'. Did you mean 'actor.epochs'?
>>> from_dict(Opt, {"epochs": "many"}, path="actor")
Traceback (most recent call last):
...
rlinf_contracts.config.errors.ConfigError: key 'actor.epochs' expects int, got str 'many'
"""

from __future__ import annotations

import dataclasses
import difflib
import types
from typing import Any, Literal, TypeVar, Union, cast, get_args, get_origin, get_type_hints

from rlinf_contracts.config.errors import ConfigError

T = TypeVar("T")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else str(key)


def _type_name(tp: Any) -> str:
    if get_origin(tp) is Literal:
        return " | ".join(repr(a) for a in get_args(tp))
    if get_origin(tp) in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in get_args(tp))
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _convert(tp: Any, value: Any, path: str) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None and type(None) in args:
            return None
        non_null = [a for a in args if a is not type(None)]
        if len(non_null) == 1:  # Optional[X]: keep X's own, more precise error
            return _convert(non_null[0], value, path)
        if value is None:
            raise ConfigError(
                f"key '{path}' cannot be null: give a {_type_name(tp)} or leave the key out for "
                "its default"
            )
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, path)
            except ConfigError as e:
                errors.append(e)
        raise ConfigError(
            f"key '{path}' expects {_type_name(tp)}, got {type(value).__name__} {value!r}"
        )
    if origin is Literal:
        if value in get_args(tp):
            return value
        near = difflib.get_close_matches(str(value), [str(a) for a in get_args(tp)], n=1)
        hint = f" Did you mean '{near[0]}'?" if near else ""
        raise ConfigError(f"key '{path}' must be one of {_type_name(tp)}, got {value!r}.{hint}")
    if value is None and (dataclasses.is_dataclass(tp) or origin is dict or tp is dict):
        raise ConfigError(
            f"key '{path}' cannot be null: give a mapping (e.g. {path}={{...}}) or leave the key "
            "out for its default"
        )
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(
                f"key '{path}' expects a mapping ({tp.__name__}), got {type(value).__name__}"
            )
        return from_dict(tp, value, path)
    if origin in (list, tuple) or tp in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"key '{path}' expects a list, got {type(value).__name__} {value!r}")
        args = get_args(tp)
        item_tp = args[0] if args else Any
        items = [_convert(item_tp, v, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if (origin is tuple or tp is tuple) else items
    if origin is dict or tp is dict:
        if not isinstance(value, dict):
            raise ConfigError(
                f"key '{path}' expects a mapping, got {type(value).__name__} {value!r}"
            )
        args = get_args(tp)
        val_tp = args[1] if len(args) == 2 else Any
        return {k: _convert(val_tp, v, _join(path, k)) for k, v in value.items()}
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads `3e-4` (no dot) as a string
            try:
                return float(value)
            except ValueError:
                pass
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is str:
        if isinstance(value, str):
            return value
    elif isinstance(tp, type) and isinstance(value, tp):
        return value
    raise ConfigError(
        f"key '{path}' expects {_type_name(tp)}, got {type(value).__name__} {value!r}"
    )


def from_dict(cls: type[T], data: dict[str, Any] | None, path: str = "") -> T:
    """Instantiate dataclass ``cls`` from ``data``; every unknown key or bad type is an error."""
    data = dict(data or {})
    # cls is a dataclass type (T stays unbound so callers keep their own type variables)
    fields = {f.name: f for f in dataclasses.fields(cast(Any, cls)) if f.init}
    hints = get_type_hints(cls)
    for key in data:
        if key not in fields:
            near = difflib.get_close_matches(str(key), list(fields), n=1, cutoff=0.5)
            hint = f" Did you mean '{_join(path, near[0])}'?" if near else ""
            raise ConfigError(f"unknown key '{_join(path, key)}'.{hint}")
    kwargs = {k: _convert(hints[k], v, _join(path, k)) for k, v in data.items()}
    try:
        obj = cls(**kwargs)
    except TypeError as e:  # a required field without a default
        missing = [
            n
            for n, f in fields.items()
            if n not in kwargs
            and f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ]
        raise ConfigError(
            f"missing required key(s): {', '.join(_join(path, m) for m in missing)}"
        ) from e
    validate = getattr(obj, "validate", None)
    if callable(validate):
        try:
            validate()
        except ConfigError as e:
            raise ConfigError(str(e) if not path else f"{path}: {e}") from None
    return obj


def to_dict(obj: Any) -> Any:
    """Dataclass tree -> plain dict (for checkpoints and logs)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_dict(v) for k, v in obj.items()}
    return obj


def help_text(cls: type, prefix: str = "") -> list[str]:
    """One line per leaf key: ``key (type, default): help`` — printed by ``rlinf train
    --help-config``."""
    lines = []
    hints = get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        key = _join(prefix, f.name)
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            lines.extend(help_text(tp, key))
            continue
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else (
                f.default_factory() if f.default_factory is not dataclasses.MISSING else "required"
            )
        )
        lines.append(f"{key} ({_type_name(tp)}, default {default!r}): {f.metadata.get('help', '')}")
    return lines
