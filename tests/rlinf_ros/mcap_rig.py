"""The small robot spec the bag tests record with (one wrist camera, a 7-joint arm + gripper)."""

H, W = 12, 16
SPEC = {
    "task": "pick",
    "control_hz": 10,
    "state": [["joint_pos", 7], ["gripper_width", 1]],
    "action": {"control": "joint_delta", "dim": 8, "joint_scale": 0.05},
    "cameras": [["wrist", H, W]],
}
T0 = 1_000.0  # s: the first observation's stamp
