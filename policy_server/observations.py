"""Requests -> canonical observations: layout adapters, validation against the policy's spec,
and collation of many requests into one batch.

Why adapters: clients speak different layouts (our canonical ``state`` / ``images`` /
``instruction`` map; openpi's LIBERO-style flat ``observation/*`` keys with ``prompt``). Each
layout is one small registered adapter that maps onto the canonical map; the server picks one
by name or auto-detects per request. Why validate here: a bad request must fail with a message
naming the key *before* it joins a batch, so one client's mistake never reaches the model or
the other clients sharing that batch.

>>> spec = {"state": ("float32", (2,))}
>>> obs = to_canonical({"observation/state": np.ones(2), "prompt": "go"}, "auto", {})
>>> sorted(validate_observation(obs, spec, uses_instruction=True).items())[1:]
[('instruction', 'go'), ('state', array([1., 1.], dtype=float32))]
>>> validate_observation({"state": np.ones(3, np.float32)}, spec, False)
Traceback (most recent call last):
...
policy_server.observations.ObservationError: observation key 'state' has shape (3,), expected (2,)
>>> validate_observation({"state": np.array([1e39, 0.0])},  # finite in float64, inf in float32
...                      spec, False)
Traceback (most recent call last):
...
policy_server.observations.ObservationError: observation key 'state' contains NaN or inf after
conversion to float32 (values beyond ±3.4e+38 overflow)
>>> to_canonical({"observation/state": np.ones(2), b"junk": 1}, "auto", {})
Traceback (most recent call last):
...
policy_server.observations.ObservationError: observation keys must be strings; got bytes key b'junk'

Optional per-sample *extras* (:data:`EXTRAS`) ride along with an observation: the policy
client's real-time chunking sends the committed prefix ``rtc_prefix`` [P, A] and the expected
inference delay ``rtc_inference_delay`` so a flow policy can inpaint it. They are validated
(errors name the key) and reach ``infer`` only for a policy that lists them in its
``infer_extras`` attribute; for any other policy they are dropped, so an RTC client works with
every server.

>>> extras = {"rtc_prefix": np.zeros((3, 2)), "rtc_inference_delay": 1}
>>> obs = to_canonical({"state": np.ones(2), **extras}, "auto", {})
>>> out = validate_observation(obs, spec, False, accepts=tuple(extras), action_dim=2)
>>> out["extras"]["rtc_prefix"].shape, out["extras"]["rtc_inference_delay"]
((3, 2), 1)
>>> "extras" in validate_observation(obs, spec, False)  # a policy that accepts none: dropped
False
>>> bad = {**obs, "extras": {"rtc_inference_delay": -1}}
>>> validate_observation(bad, spec, False, ("rtc_inference_delay",), 2)
Traceback (most recent call last):
...
policy_server.observations.ObservationError: observation key 'rtc_inference_delay' must be an
integer >= 0 (control ticks), got -1
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlinf_contracts.registry import Registry
from rlinf_contracts.wire import clip

ObservationSpec = dict[str, tuple[str, tuple[int, ...]]]
Canonical = dict[str, Any]  # {"state": array, "images": {cam: HxWx3}, "instruction": str}

# dtypes accepted for a declared dtype and cast to it (robots often send float64 state)
_CASTABLE = {"float32": ("float16", "float32", "float64"), "uint8": ("uint8",)}


class ObservationError(ValueError):
    """A request that does not match the policy's observation spec; names the offending key."""

    def __init__(self, key: str | None, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True)
class Adapter:
    """One request layout: ``matches`` recognises it, ``convert`` maps it onto the canonical map."""

    name: str
    matches: Callable[[dict[str, Any]], bool]
    convert: Callable[[dict[str, Any], dict[str, str]], Canonical]


ADAPTERS: Registry[Adapter] = Registry("observation adapter")


@dataclass(frozen=True)
class Extra:
    """One optional per-sample request key: ``check(value, action_dim)`` validates and normalises
    it; ``signature`` says which samples can share a forward (same shape / value); ``collate``
    batches the values of samples with equal signatures."""

    check: Callable[[str, Any, int], Any]
    signature: Callable[[Any], Any]
    collate: Callable[[list[Any]], Any]


EXTRAS: Registry[Extra] = Registry("request extra")


def _check_prefix(key: str, value: Any, action_dim: int) -> np.ndarray:
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "fiu":
        raise ObservationError(
            key,
            f"observation key '{key}' must be a float array [P, {action_dim}] (committed "
            f"actions), got {type(value).__name__}",
        )
    if value.ndim != 2 or value.shape[1] != action_dim:
        raise ObservationError(
            key,
            f"observation key '{key}' has shape {clip(tuple(value.shape))}, expected "
            f"[P, {action_dim}] (rows of committed actions)",
        )
    out = value.astype(np.float32)
    if not np.all(np.isfinite(out)):
        raise ObservationError(key, f"observation key '{key}' contains NaN or inf")
    return out


def _check_delay(key: str, value: Any, _action_dim: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ObservationError(
            key,
            f"observation key '{key}' must be an integer >= 0 (control ticks), got {clip(value)}",
        )
    return int(value)


EXTRAS.add("rtc_prefix", Extra(_check_prefix, lambda v: tuple(v.shape), np.stack))
EXTRAS.add("rtc_inference_delay", Extra(_check_delay, lambda v: v, lambda vs: vs[0]))


def _extras(obs: dict[str, Any]) -> dict[str, Any]:
    return {k: obs[k] for k in EXTRAS.names() if k in obs}


def _hwc(img: Any) -> Any:
    """Channel-first uint8 images (openpi ALOHA sends CHW) -> HWC; anything else unchanged."""
    if isinstance(img, np.ndarray) and img.ndim == 3 and img.shape[0] == 3 and img.shape[-1] != 3:
        return np.moveaxis(img, 0, -1)
    return img


def _string_keys(obs: dict[Any, Any], what: str) -> None:
    """msgpack maps may carry bytes keys (openpi's array maps do); request keys must be str."""
    for key in obs:
        if not isinstance(key, str):
            raise ObservationError(
                None, f"{what} must be strings; got {type(key).__name__} key {clip(key)}"
            )


def _canonical(obs: dict[str, Any], camera_map: dict[str, str]) -> Canonical:
    images = obs.get("images", {})
    if not isinstance(images, dict):
        raise ObservationError(
            "images",
            f"observation key 'images' must be a map camera -> image, got {type(images).__name__}",
        )
    _string_keys(images, "camera names in 'images'")
    return {
        "state": obs.get("state"),
        "images": {camera_map.get(k, k): _hwc(v) for k, v in images.items()},
        "instruction": obs.get("instruction", obs.get("prompt")),
        "extras": _extras(obs),
    }


def _openpi_flat(obs: dict[str, Any], camera_map: dict[str, str]) -> Canonical:
    images = {}
    for key, value in obs.items():
        if key.startswith("observation/") and key != "observation/state":
            name = key.split("/", 1)[1]
            images[camera_map.get(name, name)] = _hwc(value)
    return {
        "state": obs.get("observation/state"),
        "images": images,
        "instruction": obs.get("prompt"),
        "extras": _extras(obs),
    }


ADAPTERS.add("canonical", Adapter("canonical", lambda o: "state" in o or "images" in o, _canonical))
ADAPTERS.add(
    "openpi_flat",
    Adapter(
        "openpi_flat", lambda o: any(str(k).startswith("observation/") for k in o), _openpi_flat
    ),
)
_AUTO_ORDER = ("openpi_flat", "canonical")


def to_canonical(obs: Any, adapter: str, camera_map: dict[str, str]) -> Canonical:
    """Map one request onto the canonical layout with ``adapter`` (or ``"auto"``)."""
    if not isinstance(obs, dict):
        raise ObservationError(
            None, f"a request must be a msgpack map of observation keys, got {type(obs).__name__}"
        )
    _string_keys(obs, "observation keys")
    if adapter == "auto":
        for name in _AUTO_ORDER:
            if ADAPTERS.get(name).matches(obs):
                return ADAPTERS.get(name).convert(obs, camera_map)
        keys = _key_list(obs)
        raise ObservationError(
            "state",
            f"observation key 'state' is missing (got keys: {keys}); send 'state' + 'images' "
            "or openpi-style 'observation/state' + 'observation/<camera>'",
        )
    return ADAPTERS.get(adapter).convert(obs, camera_map)


def _key_list(obs: dict[str, Any], most: int = 8) -> str:
    """The keys a request had, for an error message: at most ``most``, each clipped."""
    keys = sorted(obs)
    text = ", ".join(k if len(k) <= 40 else clip(k, 40) for k in keys[:most]) or "(none)"
    return text + (f", … ({len(keys)} keys)" if len(keys) > most else "")


def _check_array(key: str, value: Any, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise ObservationError(
            key,
            f"observation key '{key}' must be a numpy array ({dtype} {list(shape)}), got "
            f"{type(value).__name__}",
        )
    if value.dtype.name not in _CASTABLE.get(dtype, (dtype,)):
        raise ObservationError(
            key, f"observation key '{key}' has dtype {value.dtype.name}, expected {dtype}"
        )
    if tuple(value.shape) != tuple(shape):
        raise ObservationError(
            key,
            f"observation key '{key}' has shape {clip(tuple(value.shape))}, expected "
            f"{tuple(shape)}",
        )
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is checked below, on the result
        out = value.astype(dtype, copy=False)
    if out.dtype.kind == "f" and not np.all(np.isfinite(out)):  # range check *after* the cast
        raise ObservationError(
            key,
            f"observation key '{key}' contains NaN or inf after conversion to {dtype} "
            f"(values beyond ±{np.finfo(out.dtype).max:.1e} overflow)",
        )
    return out


def validate_observation(
    obs: Canonical,
    spec: ObservationSpec,
    uses_instruction: bool,
    accepts: tuple[str, ...] = (),
    action_dim: int = 0,
) -> Canonical:
    """Check a canonical sample against the per-sample spec; returns it with dtypes normalised.

    ``accepts``: the extras the policy takes (its ``infer_extras``); those present are validated
    against ``action_dim`` and kept under ``"extras"``, every other extra is dropped."""
    out: Canonical = {"images": {}, "instruction": ""}
    for key, (dtype, shape) in spec.items():
        if key.startswith("images/"):
            cam = key.split("/", 1)[1]
            images = obs.get("images") or {}
            if cam not in images:
                have = _key_list(images)
                raise ObservationError(
                    key,
                    f"observation key '{key}' is missing (cameras sent: {have}); "
                    "set server.camera_map to rename cameras",
                )
            out["images"][cam] = _check_array(key, images[cam], dtype, shape)
        else:
            if obs.get(key) is None:
                raise ObservationError(
                    key, f"observation key '{key}' is missing; expected {dtype} {list(shape)}"
                )
            out[key] = _check_array(key, obs[key], dtype, shape)
    instruction = obs.get("instruction")
    if uses_instruction and not isinstance(instruction, str):
        raise ObservationError(
            "instruction",
            "observation key 'instruction' (or 'prompt') must be a string for this "
            f"policy, got {type(instruction).__name__}",
        )
    out["instruction"] = instruction if isinstance(instruction, str) else ""
    sent = obs.get("extras") or {}
    extras = {k: EXTRAS.get(k).check(k, sent[k], action_dim) for k in accepts if k in sent}
    if extras:
        out["extras"] = extras
    return out


def extras_signature(sample: Canonical) -> tuple[Any, ...]:
    """Samples with equal signatures can share one forward (same extras, same prefix shape)."""
    extras = sample.get("extras") or {}
    return tuple((k, EXTRAS.get(k).signature(extras[k])) for k in sorted(extras))


def group_by_extras(samples: list[Canonical]) -> list[list[int]]:
    """Indices of ``samples`` grouped by :func:`extras_signature`, in first-seen order: one
    forward per group (a client with a 3-row prefix and one without never share a batch)."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, s in enumerate(samples):
        groups.setdefault(extras_signature(s), []).append(i)
    return list(groups.values())


def collate(samples: list[Canonical]) -> dict[str, Any]:
    """Validated samples (of one :func:`group_by_extras` group) -> one batched canonical observation
    (leading batch axis); extras become top-level keys (``rtc_prefix`` [B, P, A])."""
    first = samples[0]
    batch: dict[str, Any] = {
        k: np.stack([s[k] for s in samples])
        for k in first
        if k not in ("images", "instruction", "extras")
    }
    for k in first.get("extras") or {}:
        batch[k] = EXTRAS.get(k).collate([s["extras"][k] for s in samples])
    batch["images"] = {
        cam: np.stack([s["images"][cam] for s in samples]) for cam in first["images"]
    }
    batch["instruction"] = [s["instruction"] for s in samples]
    return batch
