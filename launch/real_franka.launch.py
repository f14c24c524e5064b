"""ros2 launch launch/real_franka.launch.py [config:=configs/ros_real_franka.yaml]

Starts the node graph of configs/ros_real_franka.yaml (same YAML as `rlinf ros up
configs/ros_real_franka.yaml`). One launch_ros Node action per node, its YAML section as ROS
parameters; the rlinf-ros package must be importable by the Python that runs `ros2 launch`. Needs a
system ROS 2 with launch_ros; import-guarded so it loads (and fails clearly) without.
"""

from rlinf_ros.launch_support import graph_launch_description


def generate_launch_description():
    return graph_launch_description(default_config="configs/ros_real_franka.yaml")
