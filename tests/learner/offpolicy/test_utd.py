"""The bounded backlog of owed updates and the update/data ratio a learner reports keeping."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from learner.offpolicy.learner import backlog_cap
from learner.offpolicy.utd import UtdMeter


def test_the_cap_drops_owed_updates_beyond_it_and_counts_them():
    m = UtdMeter(utd_ratio=3.0, cap=600)
    owed = m.owe(0.0, 600.0)  # one 200-step episode at UTD 3
    owed = m.owe(owed - 100, 600.0)  # 100 paid, the next episode arrives
    assert owed == 600.0 and m.dropped == 500.0 and m.accrued == 1200.0
    assert UtdMeter(utd_ratio=3.0, cap=0).owe(5000.0, 600.0) == 5600.0  # 0 = no cap


def test_rows_report_the_kept_ratio_backlog_and_trained_share():
    m = UtdMeter(utd_ratio=3.0)
    first = m.row(updates=0, arrived=0, owed=0.0, pending=0, wall_s=0.0)
    assert first["learner/transitions_trained_share"] == 1.0
    assert "learner/utd_effective" not in first  # no transition arrived yet
    m.owe(0.0, 3.0 * 100)  # 100 transitions in the replay
    m.busy_s = 10.0  # 135 updates took 10 s of the 20 s window
    row = m.row(updates=135, arrived=300, owed=165.0, pending=200, wall_s=20.0)
    assert row["learner/utd_effective"] == pytest.approx(135 / 300)
    assert row["learner/backlog"] == pytest.approx(165 + 3 * 200)
    # 13.5 updates/s while updating over 15 transitions/s arriving
    assert row["learner/utd_sustainable"] == pytest.approx(13.5 / 15)
    # owed work 300 + 600 queued; 165 still owed + 600 queued undone
    assert row["learner/transitions_trained_share"] == pytest.approx(1 - 765 / 900)


def test_one_log_line_when_behind_not_one_per_row(caplog):
    m = UtdMeter(utd_ratio=2.0)
    with caplog.at_level(logging.INFO, logger="learner.offpolicy.utd"):
        m.row(updates=200, arrived=100, owed=0.0, pending=0, wall_s=1.0)  # keeps up: silent
        m.row(updates=300, arrived=200, owed=0.0, pending=0, wall_s=2.0)  # 1.0 of 2.0: behind
        m.row(updates=410, arrived=300, owed=0.0, pending=0, wall_s=3.0)  # 1.1: within a fifth
        m.row(updates=460, arrived=400, owed=0.0, pending=0, wall_s=4.0)  # 0.5: a new line
        m.row(updates=660, arrived=500, owed=0.0, pending=0, wall_s=5.0)  # 2.0: recovered
        m.row(updates=860, arrived=600, owed=0.0, pending=0, wall_s=6.0)  # still fine: silent
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3, lines
    assert "1.00 updates per arrived transition of utd_ratio 2.00" in lines[0]
    assert "0.50" in lines[1] and "keeps up again" in lines[2]


def test_counters_round_trip_and_old_checkpoints_restore_zeros():
    m = UtdMeter(utd_ratio=1.0, cap=4)
    m.owe(0.0, 10.0)
    fresh = UtdMeter(utd_ratio=1.0, cap=4)
    fresh.restore(m.counters())
    assert (fresh.accrued, fresh.dropped) == (10.0, 6.0)
    fresh.restore({"env_steps": 5})
    assert (fresh.accrued, fresh.dropped) == (0.0, 0.0)


def _cfg(cap, enabled, utd=3.0):
    return SimpleNamespace(
        algorithm=SimpleNamespace(max_backlog_updates=cap, utd_ratio=utd),
        ingest=SimpleNamespace(enabled=enabled),
    )


def test_default_cap_is_one_episode_of_updates_for_robots_and_none_in_simulation():
    assert backlog_cap(_cfg(None, enabled=True), episode_steps=200) == 600.0
    assert backlog_cap(_cfg(None, enabled=False), episode_steps=200) == 0.0
    assert backlog_cap(_cfg(50, enabled=False), episode_steps=200) == 50.0
    assert backlog_cap(_cfg(0, enabled=True), episode_steps=200) == 0.0


def test_config_refuses_a_negative_cap():
    from learner.offpolicy.config import OffPolicyConfig
    from rlinf_contracts.config import ConfigError, from_dict

    with pytest.raises(ConfigError, match="algorithm.max_backlog_updates"):
        from_dict(OffPolicyConfig, {"algorithm": {"max_backlog_updates": -1}})


def test_the_sustainable_ratio_leaves_out_the_learners_other_work():
    """A learner whose core also runs a frozen encoder on every new frame can only spend the
    rest on updates: with the core full the ratio it could keep is the ratio it keeps."""
    full, spare = UtdMeter(utd_ratio=1.0), UtdMeter(utd_ratio=1.0)
    for m in (full, spare):
        m.row(updates=0, arrived=0, owed=0.0, pending=0, wall_s=0.0, cpu_s=0.0)
        m.busy_s = 6.0  # 100 updates took 6 s of the 10 s window
    # the other 4 s went to ingest work: no spare time
    row = full.row(updates=100, arrived=100, owed=0.0, pending=0, wall_s=10.0, cpu_s=10.0)
    assert row["learner/utd_sustainable"] == pytest.approx(1.0)
    # 1 s of ingest work, 3 s idle: (6 + 3) s of updates at 0.06 s each per 100 transitions
    row = spare.row(updates=100, arrived=100, owed=0.0, pending=0, wall_s=10.0, cpu_s=7.0)
    assert row["learner/utd_sustainable"] == pytest.approx(9.0 / 0.06 / 100)
