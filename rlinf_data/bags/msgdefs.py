"""ROS 2 message definitions an export writes into a bag's schema records.

Why here and not from a ROS install: an MCAP bag carries the definition text of every type it
holds (schema encoding ``ros2msg``), and a reader -- ``ros2 bag``, Foxglove, LeRobot's users --
decodes the CDR payload from that text alone. Writing it from these few strings keeps the
export free of rclpy and of the ROS message packages; ``tests/rlinf_data/test_mcap_bags.py``
checks each against the ``.msg`` files of the installed ROS 2 wheels. The bag layout is
rosbag2's: the type's own fields, then each dependency after a line of 80 ``=`` and
``MSG: pkg/Type``.
"""

from __future__ import annotations

# type -> (fields without comments, the types it depends on)
_DEFS: dict[str, tuple[str, tuple[str, ...]]] = {
    "builtin_interfaces/Time": ("int32 sec\nuint32 nanosec", ()),
    "builtin_interfaces/Duration": ("int32 sec\nuint32 nanosec", ()),
    "std_msgs/Header": ("builtin_interfaces/Time stamp\nstring frame_id", ()),
    "std_msgs/String": ("string data", ()),
    "std_msgs/Float64": ("float64 data", ()),
    "std_msgs/MultiArrayDimension": ("string label\nuint32 size\nuint32 stride", ()),
    "std_msgs/MultiArrayLayout": (
        "MultiArrayDimension[] dim\nuint32 data_offset",
        ("std_msgs/MultiArrayDimension",),
    ),
    "std_msgs/Float32MultiArray": (
        "MultiArrayLayout layout\nfloat32[] data",
        ("std_msgs/MultiArrayLayout", "std_msgs/MultiArrayDimension"),
    ),
    "std_msgs/Float64MultiArray": (
        "MultiArrayLayout layout\nfloat64[] data",
        ("std_msgs/MultiArrayLayout", "std_msgs/MultiArrayDimension"),
    ),
    "sensor_msgs/JointState": (
        "std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\n"
        "float64[] effort",
        ("std_msgs/Header", "builtin_interfaces/Time"),
    ),
    "sensor_msgs/Image": (
        "std_msgs/Header header\nuint32 height\nuint32 width\nstring encoding\n"
        "uint8 is_bigendian\nuint32 step\nuint8[] data",
        ("std_msgs/Header", "builtin_interfaces/Time"),
    ),
    "trajectory_msgs/JointTrajectoryPoint": (
        "float64[] positions\nfloat64[] velocities\nfloat64[] accelerations\nfloat64[] effort\n"
        "builtin_interfaces/Duration time_from_start",
        ("builtin_interfaces/Duration",),
    ),
    "trajectory_msgs/JointTrajectory": (
        "std_msgs/Header header\nstring[] joint_names\nJointTrajectoryPoint[] points",
        (
            "std_msgs/Header",
            "builtin_interfaces/Time",
            "trajectory_msgs/JointTrajectoryPoint",
            "builtin_interfaces/Duration",
        ),
    ),
}
SEPARATOR = "=" * 80


def short(type_name: str) -> str:
    """``sensor_msgs/msg/JointState`` -> ``sensor_msgs/JointState``."""
    return type_name.replace("/msg/", "/")


def full(type_name: str) -> str:
    """``sensor_msgs/JointState`` -> ``sensor_msgs/msg/JointState`` (the name a bag uses)."""
    pkg, _, name = short(type_name).partition("/")
    return f"{pkg}/msg/{name}"


def writable() -> list[str]:
    """Every type an export can write, by its bag name."""
    return sorted(full(t) for t in _DEFS)


def fields_of(type_name: str) -> str:
    """The field lines of one type (no comments), as in its ``.msg`` file."""
    return _DEFS[short(type_name)][0]


def msgdef(type_name: str) -> str:
    """The schema text of ``type_name`` with its dependencies, as rosbag2 writes it."""
    text, deps = _DEFS[short(type_name)]
    parts = [text]
    for dep in deps:
        parts.append(f"{SEPARATOR}\nMSG: {dep}\n{_DEFS[dep][0]}")
    return "\n".join(parts) + "\n"
