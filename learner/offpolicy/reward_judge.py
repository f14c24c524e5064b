"""The reward classifier's error rates against a judge, as the robots report them.

Why the robot reports them: on the sim twin the reward node sees both the classifier's decision
and the simulator's success flag on the same frame (``rlinf_ros.reward_sources.JudgeWindow``),
whereas the stream carries only each episode's terminal reward. Each full window of frames
becomes one report; the streamer puts the newest into the next episode's info
(``extra["reward_judge"]``), and :class:`JudgeReports` turns the reports of the arriving episodes
into ``reward_judge/*`` metrics (the newest window per robot, and the totals) plus one log line
per new window. A robot without a judge (a real bench) sends none: no metrics. A robot whose
operator confirms the classifier's successes adds its counts so far (``operator_confirmed`` /
``operator_rejected``, and ``operator_caught``: the successes it caught that the classifier
missed), summed over robots.

>>> r = JudgeReports()
>>> r.add("twin0", {"window": 1, "n": 4, "judge_pos": 2, "judge_neg": 2, "false_pos": 1,
...                 "false_neg": 0, "fp_rate": 0.5, "fn_rate": 0.0})
True
>>> r.add("twin0", {"window": 1, "n": 4})   # the same window again (next episode): ignored
False
>>> r.metrics()["reward_judge/fp_rate"], r.metrics()["reward_judge/total_fn_rate"]
(0.5, 0.0)
>>> r.add("twin0", {"window": 2, "n": 4, "operator_confirmed": 1, "operator_rejected": 3})
True
>>> r.metrics()["reward_judge/operator_rejected"]
3.0
>>> JudgeReports().metrics()
{}
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

_COUNTS = ("n", "judge_pos", "judge_neg", "false_pos", "false_neg")
# the operator's verdicts on the classifier's successes, cumulative per robot (reward.confirm)
_OPERATOR = ("operator_confirmed", "operator_rejected", "operator_caught")


class JudgeReports:
    def __init__(self) -> None:
        self.windows: dict[str, int] = {}  # robot -> newest window number seen
        self.latest: dict[str, Any] = {}
        self.totals = dict.fromkeys(_COUNTS, 0)
        self.operator: dict[str, dict[str, int]] = {}  # robot -> its cumulative verdict counts

    def add(self, robot_id: str, report: Any) -> bool:
        """One report from an episode's info; True when it is a window not seen before."""
        if not isinstance(report, dict) or "window" not in report:
            return False
        window = int(report["window"])
        if window <= self.windows.get(robot_id, 0):
            return False
        self.windows[robot_id], self.latest = window, report
        for k in _COUNTS:
            self.totals[k] += int(report.get(k, 0))
        if any(k in report for k in _OPERATOR):  # the robot's counts so far (reward.confirm)
            self.operator[robot_id] = {k: int(report.get(k, 0)) for k in _OPERATOR}
        log.info(
            "reward classifier vs judge (robot %s, window %d, %d frames): FP rate %s, FN rate %s",
            robot_id,
            window,
            int(report.get("n", 0)),
            _fmt(report.get("fp_rate")),
            _fmt(report.get("fn_rate")),
        )
        return True

    def metrics(self) -> dict[str, float]:
        if not self.windows:
            return {}
        m = {"reward_judge/windows": float(sum(self.windows.values()))}
        for k in ("fp_rate", "fn_rate"):
            if self.latest.get(k) is not None:
                m[f"reward_judge/{k}"] = float(self.latest[k])
        t = self.totals
        if t["judge_neg"]:
            m["reward_judge/total_fp_rate"] = t["false_pos"] / t["judge_neg"]
        if t["judge_pos"]:
            m["reward_judge/total_fn_rate"] = t["false_neg"] / t["judge_pos"]
        for k in _OPERATOR if self.operator else ():
            m[f"reward_judge/{k}"] = float(sum(c[k] for c in self.operator.values()))
        return m


def _fmt(v: Any) -> str:
    return "-" if v is None else f"{float(v):.3f}"
