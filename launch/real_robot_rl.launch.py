"""ros2 launch launch/real_robot_rl.launch.py [config:=configs/ros_bridge_franka_ros2.yaml]

The robot-PC side of online RL in one launch: the robot node (our driver, or bridge mode on a
ros2_control / franka_ros2 stack already running), cameras, the policy client (-> policy server
on the GPU box), the transition streamer (-> learner ingest) and/or the recorder, the reward
node (a served success classifier, or episode events). Which of them start is the YAML's
sections (`enabled`); the same YAML runs with `rlinf ros up` where launch_ros is absent.
Runbook: docs/robot_online_rl.md.
"""

from rlinf_ros.launch_support import graph_launch_description


def generate_launch_description():
    return graph_launch_description(default_config="configs/ros_bridge_franka_ros2.yaml")
