"""A full-size VLA adapter as a learner policy (model ``vla_adapter``): the runners train it.

Why a wrapper and not a new runner: the PPO / GRPO runners, ``vla_sft``, checkpoints, ``rlinf
eval`` and the policy server all speak the :class:`~learner.models.policy.Policy` protocol; an
adapter (:mod:`learner.models.adapters`) already acts with log-probs and re-scores a sample, so
one translation layer puts OpenVLA / OpenVLA-OFT / π0 / π0.5 behind every one of them.

How a sample survives the trajectory: what the adapter needs to score its sample again (OpenVLA's
action tokens, OFT's Laplace sample, π0's denoising chain) is flattened into *latent columns*
appended to the executed action, as the small flow VLA does (``learner.models.policy.executable``
gives the env only the action columns). Layouts per adapter: :data:`FAMILIES`.

Options (``model.kwargs``; a training config may write ``adapter:`` at top level, folded in by
:func:`fold_adapter_section`): ``adapter`` (the
:class:`~learner.models.adapters.gpu_config.AdapterSection`: a released checkpoint on ``device`` /
``dtype``, or ``tiny: true`` for random weights of the real key layout), ``action_index`` (which
adapter action dimensions the env executes; default the first ``action_dim``), ``state_index`` (env
state entries the adapter reads; default the first ``state_dim``), ``critic_hidden`` (a separate
small state critic for GAE; the adapters have no value head). What trains is what the adapter leaves
trainable (LoRA, new heads), plus the critic.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from learner.models.adapters.gpu_config import (
    AdapterSection,
    check_checkpoint,
    real_model_config,
    tiny_plan,
)
from learner.models.policy import Policy, PolicyOutput, PolicySpec
from rlinf_contracts.config import ConfigError, from_dict

FIXED_NOISE_SEED = (
    0  # deterministic flow actions start from the same noise (reproducible eval / serve)
)


@dataclass(frozen=True)
class Family:
    """What differs per adapter: its core (sizes, cameras, stats) config and the sample layout."""

    core: Callable[
        [Any], Any
    ]  # model config -> the object holding action_dim / state_dim / cameras
    extras: Callable[
        [Any], dict[str, tuple[tuple[int, ...], torch.dtype]]
    ]  # adapter -> latent layout
    tiny_stats: Callable[[Any, int, int], None]  # identity statistics for a random-weight model
    sft_loss: Callable[
        [Any, dict[str, Any], np.ndarray], Tensor
    ]  # adapter, obs, robot chunks [B, H, A]


def _q99_identity(core: Any, a: int, s: int) -> None:
    if not core.norm_stats and not core.norm_stats_path:
        core.norm_stats = {"q01": [-1.0] * a, "q99": [1.0] * a}


def _pi0_identity(core: Any, a: int, s: int) -> None:
    if not core.norm_stats:
        core.norm_stats = {
            "state": {"mean": [0.0] * s, "std": [1.0] * s, "q01": [-1.0] * s, "q99": [1.0] * s},
            "actions": {"mean": [0.0] * a, "std": [1.0] * a, "q01": [-1.0] * a, "q99": [1.0] * a},
        }
    core.model_action_dim = max(
        core.model_action_dim, a, s
    )  # the model pads state and actions to this width


def _openvla_sft(ad: Any, obs: dict[str, Any], actions: np.ndarray) -> Tensor:
    return -ad.log_prob(obs, {"tokens": ad.tokens_for(actions[:, 0])}).mean() / ad.action_dim


FAMILIES: dict[str, Family] = {
    "openvla": Family(
        lambda c: c,
        lambda ad: {"tokens": ((ad.action_dim,), torch.long)},
        _q99_identity,
        _openvla_sft,
    ),
    "openvla_oft": Family(
        lambda c: c.vla,
        lambda ad: {"actions": ((ad.chunk, ad.action_dim), torch.float32)},
        _q99_identity,
        lambda ad, o, a: ad.l1_loss(o, a),
    ),
    "pi0": Family(
        lambda c: c,
        lambda ad: {
            "chain": ((ad.cfg.num_steps + 1, ad.chunk, ad.cfg.model_action_dim), torch.float32)
        },
        _pi0_identity,
        lambda ad, o, a: ad.flow_loss(o, a),
    ),
}
FAMILIES["pi05"] = FAMILIES["pi0"]


def fold_adapter_section(raw: dict[str, Any]) -> dict[str, Any]:
    """A training config's top-level ``adapter:`` -> ``model.kwargs.adapter``
    (``model.name: vla_adapter``), its checkpoint checked now so ``--dry-run`` names a missing
    directory; ``serve:`` is the load plan's."""
    if "adapter" not in raw:
        return raw
    out = {k: v for k, v in raw.items() if k not in ("adapter", "serve")}
    model = dict(out.get("model") or {})
    name = model.setdefault("name", "vla_adapter")
    if name != "vla_adapter":
        raise ConfigError(
            f"key 'adapter' is read by model.name=vla_adapter, not model.name={name!r}"
        )
    kwargs = dict(model.get("kwargs") or {})
    if "adapter" in kwargs:
        raise ConfigError(
            "key 'adapter' is given twice (top level and model.kwargs.adapter); keep one"
        )
    sec = from_dict(AdapterSection, raw["adapter"], path="adapter")
    check_checkpoint(sec)
    if not sec.tiny:  # what the full-size config fixes, checked before anything loads
        from learner.models.adapters.gpu_config import VlaGpuConfig, load_plan

        plan = load_plan(VlaGpuConfig(adapter=sec))["config"]
        chunk, dims = getattr(plan, "chunk", 1), FAMILIES[sec.name].core(plan).action_dim
        if int(model.get("chunk", 1)) != chunk:
            raise ConfigError(
                f"key 'model.chunk' ({model.get('chunk', 1)}) must equal the {sec.name} "
                f"checkpoint's chunk ({chunk}, adapter.model.chunk)"
            )
        index = (model.get("kwargs") or {}).get("action_index") or []
        if any(not 0 <= int(i) < dims for i in index):
            raise ConfigError(
                f"key 'model.kwargs.action_index' {index} must pick among the checkpoint's {dims} "
                "action dimensions"
            )
    kwargs["adapter"] = raw["adapter"]
    model["kwargs"] = kwargs
    out["model"] = model
    return out


def build_adapter_for(spec: PolicySpec, section: dict[str, Any]) -> tuple[Any, AdapterSection]:
    """The adapter a config names, sized for ``spec`` when tiny (action / state / cameras /
    chunk)."""
    from learner.models.adapters import build_adapter

    sec = from_dict(AdapterSection, section, path="model.kwargs.adapter")
    fam = FAMILIES[sec.name]
    if sec.tiny:
        cfg = tiny_plan(sec)
        core, given = fam.core(cfg), _given(sec.model, sec.name)
        if "action_dim" not in given:
            core.action_dim = spec.action_dim
        if "state_dim" not in given:
            core.state_dim = spec.state_dim
        if "cameras" not in given and spec.cameras:
            core.cameras = tuple(spec.cameras)
        if "chunk" not in sec.model and hasattr(cfg, "chunk"):
            cfg.chunk = spec.chunk
        fam.tiny_stats(core, core.action_dim, core.state_dim)
    else:
        cfg = real_model_config(sec)
    adapter = build_adapter(sec.name, cfg=cfg)
    return adapter.to(device=sec.device, dtype=getattr(torch, sec.dtype)), sec


def _given(model: dict[str, Any], name: str) -> dict[str, Any]:
    return dict(model.get("vla") or {}) if name == "openvla_oft" else dict(model)


class VlaAdapterPolicy(Policy):
    """See the module docstring."""

    def __init__(
        self,
        spec: PolicySpec,
        adapter: dict[str, Any] | None = None,
        action_index: list[int] | None = None,
        state_index: list[int] | None = None,
        critic_hidden: list[int] | tuple[int, ...] | None = (64, 64),
        **_: Any,
    ) -> None:
        super().__init__()
        if not adapter:
            raise ConfigError(
                "model vla_adapter needs key 'adapter' (top level, or model.kwargs.adapter): "
                "name and checkpoint, or tiny: true"
            )
        self.spec = spec
        self.adapter, sec = build_adapter_for(spec, adapter)
        self.family = FAMILIES[sec.name]
        ad = self.adapter
        if ad.chunk != spec.chunk:
            raise ConfigError(
                f"key 'model.chunk' ({spec.chunk}) must equal the {sec.name} adapter's chunk "
                f"({ad.chunk})"
            )
        self.action_index = (
            list(range(spec.action_dim)) if action_index is None else list(action_index)
        )
        if len(self.action_index) != spec.action_dim or max(self.action_index) >= ad.action_dim:
            raise ConfigError(
                f"key 'model.kwargs.action_index' must pick {spec.action_dim} of the adapter's "
                f"{ad.action_dim} action dimensions, got {self.action_index}"
            )
        self.state_index = (
            list(range(min(spec.state_dim, ad.state_dim)))
            if state_index is None
            else list(state_index)
        )
        if len(self.state_index) > ad.state_dim or (
            self.state_index and max(self.state_index) >= spec.state_dim
        ):
            raise ConfigError(
                f"key 'model.kwargs.state_index' picks at most {ad.state_dim} of the env's "
                f"{spec.state_dim} state entries, got {self.state_index}"
            )
        self.env_cameras = list(spec.cameras)
        self.layout = self.family.extras(ad)
        self.latent_size = sum(math.prod(shape) for shape, _ in self.layout.values())
        self.latent_cols = math.ceil(self.latent_size / spec.chunk)
        layers: list[nn.Module] = []
        width = spec.state_dim
        for h in critic_hidden or ():
            layers += [nn.Linear(width, h), nn.Tanh()]
            width = h
        self.critic = (
            nn.Sequential(*layers, nn.Linear(width, 1)).to(ad.device)
            if critic_hidden is not None
            else None
        )

    # ---- observations and samples ------------------------------------------------------------
    def adapter_obs(self, obs: dict[str, Any]) -> dict[str, Any]:
        """Tensors as the runners hold them -> the adapter's numpy observation (its cameras, its
        state)."""
        state = np.asarray(
            torch.as_tensor(obs["state"]).detach().float().cpu().numpy(), dtype=np.float64
        )
        b = state.shape[0]
        sel = np.zeros((b, self.adapter.state_dim))
        sel[:, : len(self.state_index)] = state[:, self.state_index]
        imgs = {k: torch.as_tensor(v).cpu().numpy() for k, v in (obs.get("images") or {}).items()}
        size = next(iter(imgs.values())).shape[1:3] if imgs else (self.adapter.image_size,) * 2
        cams: dict[str, np.ndarray] = {}
        for i, cam in enumerate(
            self.adapter.cameras
        ):  # env cameras in order; views the env lacks are black
            src = self.env_cameras[i] if i < len(self.env_cameras) else None
            cams[cam] = imgs[src] if src in imgs else np.zeros((b, *size, 3), np.uint8)
        instr = list(obs.get("instruction") or [])
        return {"state": sel, "images": cams, "instruction": instr or [""] * b}

    def pack(self, robot: np.ndarray, extras: dict[str, Tensor]) -> Tensor:
        """Executed action columns + the sample's latent columns:
        [B, chunk, action_dim + latent]."""
        b = robot.shape[0]
        act = torch.as_tensor(robot[..., self.action_index], dtype=torch.float32)
        flat = torch.cat([extras[k].reshape(b, -1).float().cpu() for k in self.layout], 1)
        pad = self.latent_cols * self.spec.chunk - flat.shape[1]
        lat = torch.cat([flat, flat.new_zeros(b, pad)], 1).reshape(
            b, self.spec.chunk, self.latent_cols
        )
        return torch.cat([act, lat], -1)

    def unpack(self, actions: Tensor) -> dict[str, Tensor]:
        b = actions.shape[0]
        flat = actions[..., self.spec.action_dim :].reshape(b, -1)
        out, i = {}, 0
        for k, (shape, dtype) in self.layout.items():
            n = math.prod(shape)
            part = flat[:, i : i + n].reshape(b, *shape)
            out[k] = part.round().to(dtype) if dtype == torch.long else part.to(dtype)
            i += n
        return out

    def value(self, obs: dict[str, Any]) -> Tensor | None:
        if self.critic is None:
            return None
        state = torch.as_tensor(obs["state"])
        value = self.critic(state.float().to(self.adapter.device)).float().to(state.device)
        # a copy, not a view of the [B, 1] output: a sharded (fsdp) policy's forward returns it,
        # and FSDP's backward hook on a view would be lost to an in-place op
        return value.squeeze(-1).clone()

    # ---- policy protocol ---------------------------------------------------------------------
    def forward(self, obs: dict[str, Any]) -> PolicyOutput:
        return PolicyOutput(dist=AdapterDistribution(self, obs), value=self.value(obs))

    def sft_loss(self, obs: dict[str, Any], actions: Tensor) -> Tensor:
        """The adapter's own supervised loss (OpenVLA token NLL, OFT L1, π0 flow matching) on robot
        chunks."""
        a = np.asarray(torch.as_tensor(actions).float().cpu().numpy(), dtype=np.float64)
        full = np.zeros(a.shape[:-1] + (self.adapter.action_dim,))
        full[..., self.action_index] = a
        return self.family.sft_loss(self.adapter, self.adapter_obs(obs), full)

    def update_normalizer(self, states: Tensor, instructions: list[str] | None = None) -> None:
        """No-op: the adapter normalises with its checkpoint's statistics (what ``vla_sft``
        calls)."""


class AdapterDistribution:
    """Lazy: the adapter runs only when a sample, the mode or a log-prob is asked for (the rollout
    calls ``forward`` for values at every step)."""

    def __init__(self, policy: VlaAdapterPolicy, obs: dict[str, Any]) -> None:
        self.policy, self.obs = policy, obs
        self._np: dict[str, Any] | None = None
        self._scored: tuple[Tensor, Tensor] | None = None
        self._last_logp: Tensor | None = None

    def _obs(self) -> dict[str, Any]:
        if self._np is None:
            self._np = self.policy.adapter_obs(self.obs)
        return self._np

    def _act(self, deterministic: bool) -> tuple[Tensor, Tensor]:
        gen = torch.Generator().manual_seed(FIXED_NOISE_SEED) if deterministic else None
        out = self.policy.adapter.act(self._obs(), deterministic=deterministic, generator=gen)
        packed = self.policy.pack(out.actions, out.extras)
        logp = torch.as_tensor(out.log_prob, dtype=torch.float32)
        self._scored = (packed, logp)
        return packed, logp

    def sample(self) -> tuple[Tensor, Tensor]:
        return self._act(False)

    def mode(self) -> Tensor:
        """The executed columns only: a deterministic action is never re-scored (eval, serving)."""
        packed, logp = self._act(True)
        act = packed[..., : self.policy.spec.action_dim]
        self._scored = (act, logp)
        return act

    def log_prob(self, actions: Tensor) -> Tensor:
        if self._scored is not None and actions is self._scored[0]:
            return self._scored[
                1
            ]  # the act call's own log-prob (a deterministic flow chain has none to recompute)
        extras = self.policy.unpack(actions)
        dev = self.policy.adapter.device
        logp = self.policy.adapter.log_prob(
            self._obs(), {k: v.to(dev) for k, v in extras.items()}
        ).float()
        # on the batch's device (the runners' update is on the CPU; the gradient flows back to the
        # adapter's)
        logp = logp.to(torch.as_tensor(self.obs["state"]).device)
        self._last_logp = logp
        return logp

    def entropy(self) -> Tensor:
        """A Monte-Carlo estimate, ``-log p`` of the scored samples (detached: no entropy bonus
        gradient)."""
        if self._last_logp is not None:
            return -self._last_logp.detach()
        n = len(np.asarray(torch.as_tensor(self.obs["state"]).cpu()))
        return torch.zeros(n)
