"""Robot drivers in plain Python (no ROS, no Ray, no torch): arms, dual-arm, cameras, safety.

Import submodules directly (``robot_drivers.arm``, ``robot_drivers.safety``...); this package
imports nothing heavy so MuJoCo / pylibfranka load only when a backend needs them.
"""
