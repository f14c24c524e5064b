"""``rlinf collect`` keeps failed episodes as demos only knowingly: a warning counts them and names
``--only-success``; the summary and the warning count the same store."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from rlinf_cli.collect_ros import Counts, failures_warning
from rlinf_cli.main import main


def test_failures_kept_as_demos_are_named_with_the_flag() -> None:
    text = failures_warning(20, 15, only_success=False)
    assert text is not None and text.startswith("5 of 20 kept episodes failed"), text
    assert "--only-success" in text


@pytest.mark.parametrize("kept, successes, only", [(20, 20, False), (3, 1, True), (0, 0, False)])
def test_no_warning_when_no_failure_was_kept(kept, successes, only) -> None:
    assert failures_warning(kept, successes, only) is None


def test_ros_counts_feed_the_same_warning() -> None:
    counts = Counts(kept=20, successes=15)
    assert "(15 successful)" in counts.describe(Path("demos"))
    assert failures_warning(counts.kept, counts.successes, False) == failures_warning(20, 15, False)


@pytest.mark.sim
def test_sim_collect_warns_about_the_failures_it_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from rlinf_data.store import EpisodeStore

    caplog.set_level(logging.INFO)
    out = tmp_path / "demos"
    # noise 2 (the maximum) with seed 0: the oracle fails some reaches, deterministically
    argv = ["collect", "mujoco_franka/reach", "--episodes", "4", "--noise", "2.0", "--seed", "0"]
    assert main([*argv, "--out", str(out)]) == 0
    failed = sum(not ep.info.success for ep in EpisodeStore(out, mode="r"))
    assert failed >= 1  # the run really kept failures
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    found = [m for m in warned if re.search(rf"{failed} of 4 kept episodes failed", m)]
    assert found and "--only-success" in found[0], warned
