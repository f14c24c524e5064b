"""EventSummary: the first event of a kind at once, its repeats in one line per interval."""

from __future__ import annotations

from rlinf_contracts.event_log import EventSummary


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def summary(interval: float = 30.0) -> tuple[EventSummary, Clock, list[str]]:
    clock, lines = Clock(), []
    return EventSummary("safety", interval, clock=clock, emit=lines.append), clock, lines


def test_first_event_of_each_kind_is_logged_at_once_repeats_are_summarised() -> None:
    s, clock, lines = summary()
    assert s.note("velocity", "velocity clamp on joint 2")
    assert s.note("workspace", "workspace clamp at z=0.9")
    for k in range(1, 13):  # 12 more velocity clamps and 3 more workspace clamps in 12 s
        clock.t = float(k)
        assert not s.note("velocity", "velocity clamp on joint 2")
        if k <= 3:
            assert not s.note("workspace", "workspace clamp at z=0.9")
    assert lines == ["velocity clamp on joint 2", "workspace clamp at z=0.9"]
    clock.t = 30.9  # the window opened at the first repeat (t=1): not closed yet
    s.poll()
    assert len(lines) == 2
    clock.t = 31.0
    s.poll()
    assert lines[2:] == ["safety: 12 velocity, 3 workspace in the last 30 s"]
    assert s.total == {"velocity": 13, "workspace": 4} and not s.pending


def test_at_most_one_summary_per_interval_however_many_events() -> None:
    s, clock, lines = summary(10.0)
    for k in range(1000):  # 10 events a second for 100 s
        clock.t = k * 0.1
        s.note("clamp", "clamp")
    # one line at once, then a summary each time a window of 10 s closed: at t=10.1, 20.2, ...
    assert lines[0] == "clamp" and len(lines) == 1 + 9
    assert lines[1] == "safety: 100 clamp in the last 10 s"
    assert sum(int(line.split()[1]) for line in lines[1:]) + s.pending["clamp"] == 999


def test_a_kind_quiet_for_an_interval_is_logged_at_once_again() -> None:
    s, clock, lines = summary(30.0)
    s.note("estop", "estop latched")
    clock.t = 29.0
    assert not s.note("estop", "estop latched")  # a repeat within 30 s
    clock.t = 59.0
    assert s.note("estop", "estop latched (again)")  # 30 s after the last one: news again
    assert lines[0] == "estop latched" and lines[-1] == "estop latched (again)"


def test_flush_reports_a_burst_that_stopped() -> None:
    s, clock, lines = summary(30.0)
    s.note("clamp", "clamp")
    clock.t = 2.0
    s.note("clamp", "clamp")
    clock.t = 5.0
    s.flush()
    assert lines == ["clamp", "safety: 1 clamp in the last 3 s"]
    s.flush()  # nothing pending: nothing written
    assert len(lines) == 2


def test_describe_words_the_counts() -> None:
    clock, lines = Clock(), []
    s = EventSummary(
        "policy loop", 60.0, clock=clock, emit=lines.append, describe=lambda k, n: f"{k} x{n}"
    )
    s.note("hold", "policy loop: hold")
    clock.t = 1.0
    s.note("hold", "policy loop: hold")
    clock.t = 61.0
    s.poll()
    assert lines[-1] == "policy loop: hold x1 in the last 60 s"
