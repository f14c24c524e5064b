"""The weight-push side of benchmarks/ros_online.py: the policy server it runs as a process of
its own (``ros_online.py --serve PORT``), the MLP it serves and the fragmenting pusher.

Split out of ros_online.py to keep that script about the measurements; ros_online.py imports
these names (benchmarks/ is on its sys.path).
"""

from __future__ import annotations

TOKEN = "bench-weights-token"


def state_spec() -> object:
    """The policy client's state-only joint-delta layout (``JOINT_DELTA_SPEC``)."""
    from rlinf_contracts.spec import RobotSpec
    from rlinf_ros.policy_client_config import JOINT_DELTA_SPEC

    return RobotSpec.from_dict(JOINT_DELTA_SPEC)


def build_mlp(hidden: list[int]) -> object:
    from learner.models import PolicySpec, build_policy

    spec = state_spec()
    return build_policy(
        "mlp",
        PolicySpec(state_dim=spec.state_dim, action_dim=spec.action_dim, chunk=1, robot=spec),
        hidden=hidden,
    )


def serve_main(port: int, hidden: list[int]) -> None:
    """A real PolicyServer serving a torch MLP (TorchPolicy) that accepts pushes on /weights."""
    import asyncio
    import logging

    import torch

    from learner.serving import TorchPolicy
    from policy_server.config import ServerConfig
    from policy_server.server import PolicyServer
    from rlinf_cli.serve import serve_until_signal

    torch.set_num_threads(1)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s server %(levelname)s %(message)s")
    server = PolicyServer(
        TorchPolicy(build_mlp(hidden), threads=1),
        ServerConfig(host="127.0.0.1", port=port, max_wait_ms=0.0, weights_token=TOKEN),
    )
    asyncio.run(serve_until_signal(server))  # the same shutdown as `rlinf serve`


class FragmentingPusher:
    """A weight pusher that sends each push as one message in ``fragment`` -byte wire fragments.

    Same wire protocol and auth as :class:`policy_server.push.WeightPusher` (which sends one
    frame per push); the server joins and decodes fragments in its weight thread, so no large
    copy runs on the event loop that answers the robots (policy_server.hotswap.decode_push).
    """

    def __init__(self, url: str, token: str, fragment: int = 1 << 18) -> None:
        from policy_server.client import open_sync
        from policy_server.push import weights_url

        self.fragment = fragment
        self._ws = open_sync(
            weights_url(url),
            additional_headers={"Authorization": f"Bearer {token}"},
            max_size=None,
            compression=None,
        )
        self._ws.recv(timeout=60)  # server metadata

    def push(self, weights: bytes | dict, version: int) -> object:
        from policy_server.messages import WeightAck, WeightPush
        from policy_server.push import _to_bytes
        from rlinf_contracts.wire import packb, unpackb

        frame = memoryview(packb(WeightPush(data=_to_bytes(weights), version=version).to_wire()))
        self._ws.send(frame[i : i + self.fragment] for i in range(0, len(frame), self.fragment))
        reply = self._ws.recv(timeout=60)
        if isinstance(reply, str):
            raise RuntimeError(reply)
        return WeightAck.from_wire(unpackb(reply))

    def close(self) -> None:
        self._ws.close()
