"""The server edge of the robot-spec contract: refuse, once and clearly, a client built for another
layout.

Why at the handshake: a ROS policy client knows its robot spec before it sends a single
observation. It puts the spec (JSON) in the ``X-Rlinf-Robot-Spec`` header of the WebSocket
upgrade; a server whose policy was trained for a different state layout, action space or camera
set answers ``409 Conflict`` with one message naming both layouts, and the client stops instead
of reconnecting in a loop. Clients that send no header (openpi clients, eval scripts) are
admitted and checked per request by shape, as before.

>>> from rlinf_contracts.spec import RobotSpec
>>> policy = RobotSpec.raw(30, 7)
>>> refusal(policy, None) is None, refusal(policy, policy_header(policy)) is None
(True, True)
>>> print(refusal(policy, policy_header(RobotSpec.raw(8, 8))))
robot spec refused: state layout differs: state(30) vs state(8); action differs: raw[7] vs raw[8].
Policy: state[30] = state(30); action[7] raw x1 @10Hz; cameras: none. Robot: state[8] = state(8);
action[8] raw x1 @10Hz; cameras: none
"""

from __future__ import annotations

import json

from rlinf_contracts.spec import RobotSpec, SpecError

SPEC_HEADER = "X-Rlinf-Robot-Spec"
MAX_HEADER_BYTES = 8192


def policy_header(spec: RobotSpec) -> str:
    """The header value a client sends for its robot spec (compact JSON)."""
    return json.dumps(spec.to_dict(), separators=(",", ":"))


def refusal(policy: RobotSpec, header: str | None) -> str | None:
    """Why a client announcing ``header`` must be refused by a server of ``policy``; None: admit."""
    if header is None:
        return None
    if len(header) > MAX_HEADER_BYTES:
        return f"robot spec header is {len(header)} bytes; at most {MAX_HEADER_BYTES}"
    try:
        robot = RobotSpec.from_dict(json.loads(header))
    except (json.JSONDecodeError, SpecError) as e:
        return f"malformed {SPEC_HEADER} header: {e}"
    diffs = policy.mismatches(robot)
    if not diffs:
        return None
    return (
        f"robot spec refused: {'; '.join(diffs)}. Policy: {policy.describe()}. "
        f"Robot: {robot.describe()}"
    )
