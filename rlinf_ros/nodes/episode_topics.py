"""What the recorder and the streamer nodes share: the step / event subscriptions feeding one
:class:`rlinf_ros.recording.EpisodeAssembler`, and the episode template from the robot spec."""

from __future__ import annotations

import json
import logging
from typing import Any

from std_msgs.msg import String, UInt8MultiArray

from rlinf_contracts.episode import StepLayout
from rlinf_contracts.transitions import StepRecord, TransitionError, event_from_json
from rlinf_contracts.wire import WireError, unpackb
from rlinf_ros.config import RosGraphConfig
from rlinf_ros.nodes.common import now_s, reliable_qos
from rlinf_ros.online_config import EpisodeSourceConfig
from rlinf_ros.recording import EpisodeAssembler, EpisodeSink, EpisodeTemplate

log = logging.getLogger(__name__)


def episode_template(graph: RosGraphConfig, src: EpisodeSourceConfig) -> EpisodeTemplate:
    """Episode attributes from the policy client's robot spec (the layout its steps have)."""
    spec = graph.policy_client.spec()
    return EpisodeTemplate(
        task=src.task or spec.task or "robot",
        layout=StepLayout.from_spec(spec),
        robot=spec.to_dict(),
        instruction=graph.policy_client.instruction or spec.instruction,
        control_hz=graph.policy_client.rate_hz,
        source=src.source,
    )


def subscribe_episodes(
    node: Any, src: EpisodeSourceConfig, template: EpisodeTemplate, sink: EpisodeSink
) -> EpisodeAssembler:
    asm = EpisodeAssembler(template, sink, src.success_reward)

    def on_step(msg: UInt8MultiArray) -> None:
        try:
            asm.on_record(StepRecord.from_wire(unpackb(bytes(msg.data))), now_s(node))
        except (WireError, TransitionError) as e:
            log.warning("ignoring a step record: %s", e)

    def on_event(msg: String) -> None:
        try:
            asm.on_event(event_from_json(msg.data), now_s(node))
        except TransitionError as e:
            log.warning("ignoring an episode event: %s", e)

    def on_judge(msg: String) -> None:
        try:
            report = json.loads(msg.data)
        except json.JSONDecodeError:
            log.warning("ignoring a malformed reward judge report")
            return
        if isinstance(report, dict):
            asm.annotations["reward_judge"] = report

    if src.judge_topic:
        node.create_subscription(String, src.judge_topic, on_judge, reliable_qos(10))
    node.create_subscription(UInt8MultiArray, src.step_topic, on_step, reliable_qos(100))
    node.create_subscription(String, src.event_topic, on_event, reliable_qos(10))
    # an end event waiting for records the client never sends: settles once nothing was heard for
    # settle_s of the node clock, in which the records (the client's observation stamps) and the
    # events are stamped
    node.create_timer(0.2, lambda: asm.poll(now_s(node)))
    return asm
