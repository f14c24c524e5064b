"""The shared spec of robots with different specs: what they keep, what each drops, and the
reasons when there is none."""

from __future__ import annotations

import pytest

from rlinf_contracts.episode import StepLayout
from rlinf_contracts.spec import ActionSpace, CameraSpec, RobotSpec, StateField
from rlinf_contracts.spec_shared import SharedSpecError, dropped, restrict, shared_spec

ACT = ActionSpace("ee_delta_pos", 4)
WRIST, FRONT = CameraSpec("wrist", 64, 64), CameraSpec("front", 64, 64)


def _spec(*fields: tuple[str, int] | tuple[str, int, bool], **kw) -> RobotSpec:
    return RobotSpec(tuple(StateField(*f) for f in fields), kw.pop("action", ACT), **kw)


def test_the_shared_state_is_the_common_fields_in_the_first_specs_order() -> None:
    a = _spec(("ee_pos", 3), ("joint_pos", 7), ("goal_pos", 3), ("gripper_width", 1))
    b = _spec(("gripper_width", 1), ("object_pos", 3), ("ee_pos", 3), ("joint_pos", 7))
    c = _spec(("joint_pos", 7), ("ee_pos", 6), ("gripper_width", 1))  # ee_pos of another size
    shared = shared_spec({"a": a, "b": b, "c": c})
    assert [(f.name, f.size) for f in shared.state] == [("joint_pos", 7), ("gripper_width", 1)]
    assert shared.state_dim == 8 and shared.action == ACT
    assert dropped(a, shared) == "state ee_pos(3) goal_pos(3)"
    assert dropped(b, shared) == "state object_pos(3) ee_pos(3)"
    assert dropped(c, shared) == "state ee_pos(6)"


def test_cameras_not_on_every_robot_or_of_another_size_are_dropped() -> None:
    small_front = CameraSpec("front", 32, 32)
    a = _spec(("joint_pos", 7), cameras=(WRIST, FRONT))
    b = _spec(("joint_pos", 7), cameras=(FRONT, WRIST))
    c = _spec(("joint_pos", 7), cameras=(WRIST, small_front))
    assert shared_spec({"a": a, "b": b}).cameras == (WRIST, FRONT)
    shared = shared_spec({"a": a, "b": b, "c": c})
    assert shared.cameras == (WRIST,)
    assert dropped(a, shared) == "camera front(64x64)"
    assert dropped(c, shared) == "camera front(32x32)"
    assert shared_spec({"a": a, "none": _spec(("joint_pos", 7))}).cameras == ()


def test_each_robot_keeps_its_own_placement_and_all_get_one_step_layout() -> None:
    a = _spec(
        ("ee_pos", 3),
        ("goal_pos", 3),
        cameras=(WRIST,),
        robot="panda",
        base_position=(-0.5, 0.0, 0.0),
        home=(0.0,) * 7,
        task="mujoco_franka/reach",
    )
    b = _spec(("ee_pos", 3), ("goal_pos", 3, True), cameras=(WRIST, FRONT), robot="fr3")
    shared = shared_spec({"a": a, "b": b})
    ra, rb = restrict(a, shared), restrict(b, shared)
    assert (ra.robot, ra.base_position, ra.home, ra.task) == (
        "panda",
        (-0.5, 0.0, 0.0),
        (0.0,) * 7,
        "mujoco_franka/reach",
    )
    assert (rb.robot, rb.base_position, rb.home) == ("fr3", (0.0, 0.0, 0.0), ())
    # a field one robot sends zeroed is zeroed for all: no half-real slice
    assert ra.state == rb.state == (StateField("ee_pos", 3), StateField("goal_pos", 3, True))
    assert dropped(a, shared) == "zeroed goal_pos"
    assert StepLayout.from_spec(ra) == StepLayout.from_spec(rb) == StepLayout.from_spec(shared)
    assert RobotSpec.from_dict(ra.to_dict()) == ra  # what `rlinf spec --shared` prints loads back
    with pytest.raises(SharedSpecError, match="lacks front"):
        restrict(a, shared_spec({"b": b, "b2": b}))


def test_different_action_spaces_are_refused_naming_the_robots() -> None:
    a = _spec(("joint_pos", 7))
    joint = _spec(("joint_pos", 7), action=ActionSpace("joint_delta", 8))
    with pytest.raises(SharedSpecError) as e:
        shared_spec({"sim_twin": a, "real_arm": joint})
    msg = str(e.value)
    assert "robots sim_twin and real_arm have different action spaces" in msg
    assert "ee_delta_pos[4]" in msg and "joint_delta[8]" in msg
    assert "separate per-robot action heads are not built" in msg
    scaled = _spec(("joint_pos", 7), action=ActionSpace("ee_delta_pos", 4, pos_scale=0.1))
    with pytest.raises(SharedSpecError, match="pos_scale=0.05 .* vs .*pos_scale=0.1"):
        shared_spec({"a": a, "b": scaled})
    chunked = _spec(("joint_pos", 7), action=ActionSpace("ee_delta_pos", 4, chunk=4))
    with pytest.raises(SharedSpecError, match="chunk 1 vs .* chunk 4"):
        shared_spec({"a": a, "b": chunked})


def test_other_rates_arms_and_no_common_state_are_refused_with_the_reason() -> None:
    a = _spec(("joint_pos", 7), ("gripper_width", 1))
    with pytest.raises(SharedSpecError, match="control_hz 10 vs 20"):
        shared_spec({"a": a, "fast": _spec(("joint_pos", 7), control_hz=20.0)})
    two = _spec(("joint_pos", 7), action=ActionSpace("ee_delta_pos", 8), arms=2)
    one = _spec(("joint_pos", 7), action=ActionSpace("ee_delta_pos", 8))
    with pytest.raises(SharedSpecError, match="arm counts: 2 vs 1"):
        shared_spec({"two": two, "one": one})
    with pytest.raises(SharedSpecError) as e:
        shared_spec({"a": a, "b": _spec(("ee_pos", 3)), "c": _spec(("joint_pos", 7))})
    assert str(e.value).startswith("robots a, b and c share no state field")
    assert "a: joint_pos(7) gripper_width(1); b: ee_pos(3)" in str(e.value)
    with pytest.raises(SharedSpecError, match="at least two robots"):
        shared_spec({"a": a})


def test_the_instruction_is_shared_only_when_every_robot_uses_it() -> None:
    a = _spec(("joint_pos", 7), uses_instruction=True)
    b = _spec(("joint_pos", 7))
    shared = shared_spec({"a": a, "b": b})
    assert not shared.uses_instruction and not restrict(a, shared).uses_instruction
    assert dropped(a, shared) == "instruction" and dropped(b, shared) == "nothing"
