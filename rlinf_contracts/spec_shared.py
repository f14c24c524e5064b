"""A shared spec: the one layout robots of different specs agree on, so they feed one learner.

Why: one learner ingest stores every robot's steps in one step layout and refuses a robot whose
steps do not fit it. Robots with different sensors (another camera, a task feature one of them
cannot observe) can still feed one learner if each runs the part of its spec that all of them
can produce: the state features every spec names with the same size, in the first spec's order,
and the cameras every spec names with the same size. A policy client computes the named
features from its robot's readings, so a robot runs a spec restricted to a subset of its
features without any other change.

What cannot be shared is refused with the reason: the action space (separate per-robot action
heads are not built, so the robots must share one), the control rate and the number of arms
(both change what a step is). Per-robot placement (``robot``, ``base_position``, ``home``,
``task``, ``instruction``) stays each robot's own.

>>> from rlinf_contracts.spec import ActionSpace, CameraSpec, RobotSpec, StateField
>>> act = ActionSpace("joint_delta", 8)
>>> a = RobotSpec((StateField("joint_pos", 7), StateField("goal_pos", 3)), act,
...               cameras=(CameraSpec("wrist", 64, 64),))
>>> b = RobotSpec((StateField("joint_pos", 7),), act,
...               cameras=(CameraSpec("wrist", 64, 64), CameraSpec("front", 64, 64)))
>>> shared = shared_spec({"arm_a": a, "arm_b": b})
>>> shared.describe()
'state[7] = joint_pos(7); action[8] joint_delta x1 @10Hz; cameras: wrist(64x64)'
>>> dropped(a, shared), dropped(b, shared)
('state goal_pos(3)', 'camera front(64x64)')
>>> restrict(b, shared) == shared
True
>>> shared_spec({"arm_a": a, "slow": RobotSpec(a.state, ActionSpace("joint_delta", 8,
...                                            joint_scale=0.05))})
Traceback (most recent call last):
...
rlinf_contracts.spec_shared.SharedSpecError: robots arm_a and slow have different action
spaces: joint_delta[8] joint_scale=0.1 vs joint_delta[8] joint_scale=0.05; separate per-robot
action heads are not built, so the robots must share one action space (give them the same
policy_client.robot_spec.action)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from rlinf_contracts.spec import RobotSpec, SpecError, StateField, action_label


class SharedSpecError(SpecError):
    """Robots whose specs have no shared spec; the message names the robots and what differs."""


def shared_spec(specs: Mapping[str, RobotSpec]) -> RobotSpec:
    """The layout every robot of ``specs`` (name -> spec, names for messages) can run: the first
    spec restricted to the state fields and cameras all of them have with the same name and size.

    A field that any robot sends zeroed is zeroed in the shared spec: one robot's real values and
    another's zeros in the same slice would teach a policy a feature half of the fleet lacks.
    Raises :class:`SharedSpecError` when the action spaces, control rates or arm counts differ,
    or when no state field is shared."""
    if len(specs) < 2:
        raise SharedSpecError(f"a shared spec needs at least two robots, got {len(specs)}")
    (first_name, first), *rest = specs.items()
    for name, spec in rest:
        _check_same_step(first_name, first, name, spec)
    state = tuple(
        _shared_field(f, list(specs.values()))
        for f in first.state
        if all(_has_field(s, f) for s in specs.values())
    )
    if not state:
        listed = "; ".join(f"{n}: {s.state_label()}" for n, s in specs.items())
        raise SharedSpecError(
            f"robots {_names(specs)} share no state field (same name and size) ({listed}); "
            "give their policy_client.robot_spec.state at least one common feature"
        )
    cameras = tuple(
        c for c in first.cameras if all(c in s.cameras for s in specs.values())
    )  # CameraSpec equality is name, height and width
    uses_instruction = all(s.uses_instruction for s in specs.values())
    return replace(first, state=state, cameras=cameras, uses_instruction=uses_instruction)


def restrict(spec: RobotSpec, shared: RobotSpec) -> RobotSpec:
    """``spec`` (one robot's) running the shared layout: its own robot, base_position, home,
    task and rate, the shared state fields, cameras and instruction use. Raises
    :class:`SharedSpecError` when ``spec`` cannot produce a shared field or camera."""
    missing = [f.label() for f in shared.state if not _has_field(spec, f)]
    missing += [c.label() for c in shared.cameras if c not in spec.cameras]
    if missing:
        raise SharedSpecError(
            f"this robot's spec lacks {' '.join(missing)} of the shared spec; build the shared "
            "spec from every robot's spec"
        )
    return replace(
        spec,
        state=shared.state,
        cameras=shared.cameras,
        uses_instruction=shared.uses_instruction,
    )


def dropped(spec: RobotSpec, shared: RobotSpec) -> str:
    """What ``spec`` gives up to run ``shared``, one line (``"nothing"`` when it gives up
    nothing): dropped state fields, fields now sent zeroed, dropped cameras, the instruction."""
    kept = {f.name: f for f in shared.state}
    parts = []
    gone = [f.label() for f in spec.state if f.name not in kept]
    zeroed = [f.name for f in spec.state if f.name in kept and kept[f.name].zeroed and not f.zeroed]
    cams = [c.label() for c in spec.cameras if c not in shared.cameras]
    if gone:
        parts.append("state " + " ".join(gone))
    if zeroed:
        parts.append("zeroed " + " ".join(zeroed))
    if cams:
        parts.append(("camera " if len(cams) == 1 else "cameras ") + " ".join(cams))
    if spec.uses_instruction and not shared.uses_instruction:
        parts.append("instruction")
    return "; ".join(parts) or "nothing"


def _check_same_step(name_a: str, a: RobotSpec, name_b: str, b: RobotSpec) -> None:
    """Refuse two robots whose actions, rate or arms differ (a shared spec cannot bridge them)."""
    who = f"robots {name_a} and {name_b}"
    if a.action.semantics() != b.action.semantics() or a.action.chunk != b.action.chunk:
        la, lb = action_label(a.action), action_label(b.action)
        if a.action.chunk != b.action.chunk:
            la, lb = f"{la} chunk {a.action.chunk}", f"{lb} chunk {b.action.chunk}"
        raise SharedSpecError(
            f"{who} have different action spaces: {la} vs {lb}; separate per-robot action heads "
            "are not built, so the robots must share one action space (give them the same "
            "policy_client.robot_spec.action)"
        )
    if a.control_hz != b.control_hz:
        raise SharedSpecError(
            f"{who} run at different rates: control_hz {a.control_hz:g} vs {b.control_hz:g}; "
            "give them the same policy_client.robot_spec.control_hz"
        )
    if a.arms != b.arms:
        raise SharedSpecError(
            f"{who} have different arm counts: {a.arms} vs {b.arms}; a shared spec needs "
            "robots with the same policy_client.robot_spec.arms"
        )


def _has_field(spec: RobotSpec, f: StateField) -> bool:
    return any(g.name == f.name and g.size == f.size for g in spec.state)


def _shared_field(f: StateField, specs: list[RobotSpec]) -> StateField:
    zeroed = any(g.zeroed for s in specs for g in s.state if g.name == f.name)
    return StateField(f.name, f.size, zeroed)


def _names(specs: Mapping[str, RobotSpec]) -> str:
    names = list(specs)
    return ", ".join(names[:-1]) + " and " + names[-1]
