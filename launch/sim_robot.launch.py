"""ros2 launch launch/sim_robot.launch.py [config:=configs/ros_sim_franka.yaml]

Starts the node graph of configs/ros_sim_franka.yaml (same YAML as `rlinf ros up configs/ros_sim_franka.yaml`).
Needs a system ROS 2 with launch installed; import-guarded so it loads (and fails clearly) without.
"""

from rlinf_ros.launch_support import graph_launch_description


def generate_launch_description():  # noqa: D103 -- the ros2 launch entry point
    return graph_launch_description(default_config="configs/ros_sim_franka.yaml")
