"""ROS 2 side of rlinf-ros (rclpy): robot / camera / policy-client nodes, message conversions,
approximate-time sync, ``rlinf ros up`` process graphs and ``RosRobotEnv`` (``env: ros/franka``).

Nodes run as processes: ``python -m rlinf_ros.nodes.<robot|camera|policy_client> --config X``.
rclpy is imported by the modules that need it, not here.
"""
