"""EpisodeAssembler cuts an episode by the end event's stamp, not by arrival order, so two
subscribers that hear the records and the event interleaved differently store the same steps
(the recorder's store and the learner's, through the streamer)."""

from __future__ import annotations

import numpy as np
import pytest

from rlinf_contracts.episode import StepLayout
from rlinf_contracts.transitions import EpisodeEvent, StepRecord
from rlinf_ros.recording import EpisodeAssembler, EpisodeTemplate, ListSink


def _rec(i: float, episode: int = 1) -> StepRecord:
    return StepRecord(
        episode=episode,
        state=np.full(1, i, np.float32),
        action=np.zeros(1, np.float32),
        timestamp=100.0 + i,
    )


def _asm() -> tuple[EpisodeAssembler, ListSink]:
    sink = ListSink()
    return EpisodeAssembler(EpisodeTemplate("t", StepLayout(1, 1)), sink, settle_s=1.0), sink


def _steps(sink: ListSink) -> list[tuple]:
    return [c for c in sink.calls if c[0] == "step"]


def _end(sink: ListSink) -> tuple:
    ends = [c for c in sink.calls if c[0] == "end"]
    assert len(ends) == 1, sink.calls
    return ends[0]


@pytest.mark.parametrize("arrival", range(4))
def test_the_cut_follows_the_stamp_whatever_the_arrival_order(arrival):
    """Records 0..7 observed at 100..107, the judge's verdict stamped 105.5: wherever the event
    lands among the records, the episode is steps 0..4 (the last one rewarded) and final obs 5."""
    asm, sink = _asm()
    records = [_rec(i) for i in range(8)]
    ev = EpisodeEvent("end", success=True, stamp=105.5)
    order: list = records[: 4 + arrival] + [ev] + records[4 + arrival :]
    for item in order:
        if isinstance(item, EpisodeEvent):
            asm.on_event(item, now=0.0)
        else:
            asm.on_record(item, now=0.0)
    steps = _steps(sink)
    assert [s[1] for s in steps] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert [s[2] for s in steps] == [0.0, 0.0, 0.0, 0.0, 1.0] and steps[-1][3] is True
    end = _end(sink)
    assert end[1:4] == (1, "complete", True) and end[4]["state"][0] == 5.0


def test_a_waiting_end_settles_when_no_later_record_comes():
    asm, sink = _asm()
    for i in range(3):
        asm.on_record(_rec(i), now=0.0)
    asm.on_event(EpisodeEvent("end", success=False, stamp=110.0), now=10.0)
    asm.poll(now=10.5)
    assert not [
        c for c in sink.calls if c[0] == "end"
    ]  # still waiting for records observed before 110
    asm.poll(now=11.0)
    end = _end(sink)
    assert end[2:4] == ("truncated", False) and end[4]["state"][0] == 2.0
    assert [s[1] for s in _steps(sink)] == [0.0, 1.0] and _steps(sink)[-1][4] is True  # truncated


def test_a_new_episode_or_event_closes_the_waiting_one_first():
    asm, sink = _asm()
    for i in range(3):
        asm.on_record(_rec(i), now=0.0)
    asm.on_event(EpisodeEvent("end", success=True, stamp=101.5), now=0.0)
    asm.on_event(EpisodeEvent("begin", stamp=101.6), now=0.0)
    assert _end(sink)[4]["state"][0] == 1.0
    asm.on_record(_rec(0, episode=2), now=0.0)
    assert [c[:2] for c in sink.calls if c[0] == "begin"] == [("begin", 1), ("begin", 2)]


def test_unstamped_records_end_on_arrival_as_before():
    asm, sink = _asm()
    for i in range(4):
        asm.on_record(
            StepRecord(episode=0, state=np.full(1, i, np.float32), action=np.zeros(1, np.float32))
        )
    asm.on_event(EpisodeEvent("end", success=True, stamp=50.0))
    assert [s[1] for s in _steps(sink)] == [0.0, 1.0, 2.0] and _end(sink)[4]["state"][0] == 3.0


def test_two_subscribers_store_the_same_steps_under_any_interleaving():
    """The recorder / streamer property the ROS test checks end to end, over every position of
    the event among the records around the verdict, up to 4 records (0.4 s at 10 Hz) late."""
    results = set()
    for pos in range(3, 10):
        asm, sink = _asm()
        records = [_rec(i) for i in range(9)]
        ev = EpisodeEvent("end", success=True, stamp=104.2)
        for item in records[:pos] + [ev] + records[pos:]:
            (asm.on_event if isinstance(item, EpisodeEvent) else asm.on_record)(item, now=0.0)
        asm.poll(now=5.0)
        results.add(tuple((s[1], s[2]) for s in _steps(sink)) + (float(_end(sink)[4]["state"][0]),))
    assert len(results) == 1, results


def _feed(asm: EpisodeAssembler, items: list) -> None:
    for item in items:
        (asm.on_event if isinstance(item, EpisodeEvent) else asm.on_record)(item, now=0.0)


def test_an_end_heard_before_the_episodes_first_record_still_ends_it():
    """A short episode whose verdict reaches a subscriber before any of its records (a step backlog
    under load): the end waits for them instead of being dropped, so every subscriber stores the
    episode, the same steps, with its outcome -- never an 'aborted' episode on one side only."""
    ep1 = [_rec(i, episode=1) for i in range(3)]
    ep2 = [_rec(10 + i, episode=2) for i in range(4)]  # observed at 110..113
    end1 = EpisodeEvent("end", success=True, stamp=101.5)
    end2 = EpisodeEvent("end", success=True, stamp=112.5)
    results = set()
    # the events as early as possible (both before episode 2's records), and in their natural place
    orders = (
        ep1[:2] + [end1, end2] + ep1[2:] + ep2,
        [end1] + ep1 + [end2] + ep2,
        ep1 + [end1] + ep2[:3] + [end2] + ep2[3:],
    )
    for order in orders:
        asm, sink = _asm()
        _feed(asm, order)
        ends = [c[1:4] for c in sink.calls if c[0] == "end"]
        assert ends == [(1, "complete", True), (2, "complete", True)], sink.calls
        results.add(tuple(c[1:3] for c in sink.calls if c[0] in ("step", "end")))
    assert len(results) == 1, results
    steps = [s[1] for s in _steps(sink)]
    assert steps == [
        0.0,
        10.0,
        11.0,
    ]  # episode 1: step 0, final 1; episode 2: steps 10, 11, final 12


def test_an_end_stamped_before_an_episodes_first_record_is_not_its_verdict():
    asm, sink = _asm()
    _feed(asm, [EpisodeEvent("end", success=True, stamp=99.0)] + [_rec(i) for i in range(3)])
    assert not [
        c for c in sink.calls if c[0] == "end"
    ]  # episode 1 goes on: that verdict was about none of it
    asm.on_event(EpisodeEvent("end", success=False, stamp=101.5), now=0.0)
    asm.poll(now=5.0)
    assert _end(sink)[1:4] == (1, "truncated", False)


def test_an_episode_judged_before_a_whole_step_is_aborted_on_every_subscriber():
    """One record before the verdict is a final observation with no step: nothing to learn from,
    closed as aborted (the recorder discards it, the streamer tells the learner so)."""
    for order in (
        [_rec(0), EpisodeEvent("end", success=True, stamp=100.5), _rec(1)],
        [EpisodeEvent("end", success=True, stamp=100.5), _rec(0), _rec(1)],
    ):
        asm, sink = _asm()
        _feed(asm, order)
        assert not _steps(sink) and _end(sink)[1:4] == (1, "aborted", False)
        assert asm.stats.aborted == 1 and asm.stats.successes == 0


def test_the_settle_wait_counts_from_the_last_record_heard():
    """Records still draining after the end (a backlog) keep it waiting; it settles once quiet."""
    asm, sink = _asm()
    asm.on_record(_rec(0), now=0.0)
    asm.on_event(EpisodeEvent("end", success=True, stamp=102.5), now=1.0)
    asm.on_record(_rec(1), now=1.8)
    asm.poll(now=2.5)
    asm.on_record(_rec(2), now=2.6)  # observed before the verdict, heard 1.6 s after it: still in
    asm.poll(now=3.5)
    assert not [c for c in sink.calls if c[0] == "end"]
    asm.poll(now=3.6)
    assert _end(sink)[4]["state"][0] == 2.0 and [s[1] for s in _steps(sink)] == [0.0, 1.0]
