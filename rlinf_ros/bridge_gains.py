"""Set a compliant controller's stiffness / damping through its ROS parameter services.

Why at start and through the standard services (rcl_interfaces ``list_parameters``,
``set_parameters``, ``get_parameters``): the controllers a bridge drives (CRISP, franka_ros2's
Cartesian impedance example) keep their gains as ordinary node parameters, and a policy
trained with one compliance must meet the same compliance on the robot. So before the first
target goes out the gains of the robot spec are written, then read back: a controller that
lacks a named parameter, refuses a value, or reports another value afterwards stops the robot
node from starting with a :class:`ConfigError` that names the controller node and the
parameters -- never a bridge that runs with the controller's own defaults.

A short-lived helper node on the caller's context makes the calls, so the robot node is never
spun here (it is not yet in its executor while it is being built).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from rlinf_contracts.config import ConfigError

log = logging.getLogger(__name__)


def apply_gains(
    context: Any, node_name: str, values: dict[str, float], timeout_s: float = 10.0
) -> dict[str, float]:
    """Write ``values`` (``{parameter: value}``) to the parameters of ``node_name`` (fully
    qualified) and return what it reports back; :class:`ConfigError` when it cannot."""
    import rclpy
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import GetParameters, ListParameters, SetParameters
    from rclpy.executors import SingleThreadedExecutor

    helper = rclpy.create_node("rlinf_bridge_gains", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(helper)
    try:

        def call(srv_type: Any, service: str, request: Any) -> Any:
            client = helper.create_client(srv_type, f"{node_name}/{service}")
            if not client.wait_for_service(timeout_sec=timeout_s):
                raise ConfigError(
                    f"key 'robot.bridge.controller': no parameter service {node_name}/{service} "
                    f"within {timeout_s:g} s; is the controller loaded (namespace "
                    "'robot.bridge.namespace', node 'robot.bridge.controller')?"
                )
            future = client.call_async(request)
            deadline = time.monotonic() + timeout_s
            while not future.done() and time.monotonic() < deadline:
                executor.spin_once(timeout_sec=0.05)
            if not future.done():
                raise ConfigError(f"{node_name}/{service} did not answer within {timeout_s:g} s")
            return future.result()

        listed = call(ListParameters, "list_parameters", ListParameters.Request())
        missing = sorted(set(values) - set(listed.result.names))
        if missing:
            raise ConfigError(
                f"key 'robot.bridge.target': controller node {node_name} has no parameter(s) "
                f"{missing}; the bridge sets {sorted(values)} from the robot spec's gains. Is "
                "it the controller 'robot.bridge.target' names (or 'robot.bridge.controller' "
                "the right node)?"
            )
        request = SetParameters.Request()
        request.parameters = [
            Parameter(
                name=k,
                value=ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=float(v)),
            )
            for k, v in values.items()
        ]
        results = call(SetParameters, "set_parameters", request).results
        refused = {
            k: r.reason or "refused"
            for k, r in zip(values, results, strict=True)
            if not r.successful
        }
        if refused:
            raise ConfigError(
                f"key 'robot.bridge.impedance': controller node {node_name} refused {refused}"
            )
        got_request = GetParameters.Request()
        got_request.names = list(values)
        got = call(GetParameters, "get_parameters", got_request).values
        back = {
            k: float(v.double_value)
            for k, v in zip(values, got, strict=False)
            if v.type == ParameterType.PARAMETER_DOUBLE
        }
        wrong = {k: back.get(k) for k, v in values.items() if back.get(k) != float(v)}
        if wrong:
            raise ConfigError(
                f"key 'robot.bridge.impedance': controller node {node_name} reports {wrong} "
                f"after the bridge set {values}"
            )
        log.info("bridge: gains of %s set: %s", node_name, back)
        return back
    finally:
        executor.remove_node(helper)
        executor.shutdown()
        helper.destroy_node()
