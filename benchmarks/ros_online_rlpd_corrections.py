"""The operator's corrections of the learned reward during a twin run (``ros_online_rlpd.py
--corrections MIN``): the reward node asks the twin's judge (the operator's stand-in) to confirm
each classifier success (``reward.confirm: judge``) and keeps the frames of each verdict
(``reward.corrections_dir``); every ``MIN`` minutes with new verdicts, :class:`Retrainer` runs the
shipped command that retrains the classifier on the demos, the near misses and the corrections and
pushes it to the served classifier (``rlinf train configs/reward_classifier_push.yaml
data.extra_stores=[..., corrections] push.url=ws://...``), the command an operator would run by
hand every few minutes. With ``--catch FRAMES`` the operator also presses the success key on a
success the classifier missed (``reward.catch_missed``): the run is paid for it, and its frames
are positives for the next round. :func:`operator_reward` sets the reward node's keys;
:func:`corrections_lines` is the results paragraph.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# with an operator confirming, a missed success costs a reward and a false one only a key press:
# the classifier's latch is loosened (the graph's threshold 0.6 / 3 frames)
CONFIRMED_LATCH = {"threshold": 0.5, "consecutive": 2}


def corrections_store(work: Path, robot: int) -> Path:
    """Robot ``robot``'s corrections store: one per robot, as each bench's operator keeps its
    own (robot 0's is ``work/corrections``); the retraining reads them all."""
    return work / ("corrections" if robot == 0 else f"corrections_twin{robot}")


def operator_reward(reward: dict, store: Path, catch: int, on_reject: str) -> dict:
    """The reward node's section with the twin's judge as the operator: it confirms each
    classifier success (a rejection: ``on_reject``), presses the success key after ``catch``
    frames of a missed one (0: never), and each verdict's frames go to ``store``."""
    reward.update(confirm="judge", corrections_dir=str(store), **CONFIRMED_LATCH)
    reward.update(catch_missed=catch, on_reject=on_reject)
    return reward


def add_operator_arguments(ap: argparse.ArgumentParser) -> None:
    """The operator's flags of ``ros_online_rlpd.py`` (``--corrections``, ``--catch``,
    ``--on-reject``)."""
    ap.add_argument(
        "--corrections",
        type=float,
        default=None,
        metavar="MIN",
        help="the twin's judge confirms each classifier success as an operator would; the "
        "classifier is retrained on the verdicts and pushed every MIN minutes (results "
        "<stem>_corrections)",
    )
    ap.add_argument(
        "--catch",
        type=int,
        default=0,
        metavar="FRAMES",
        help="with --corrections: the operator also presses the success key once the task has "
        "looked done for FRAMES frames and the classifier stayed silent (results <stem>_catch)",
    )
    ap.add_argument(
        "--on-reject",
        choices=("end", "continue"),
        default="end",
        help="with --corrections: a rejected success ends the episode (end) or is a 'not yet' "
        "and the episode goes on (continue; results <stem>_continue)",
    )


def check_operator_arguments(
    ap: argparse.ArgumentParser, a: argparse.Namespace, classifier: str | None
) -> None:
    """One line per bad combination (``ap.error``), before anything starts."""
    if a.corrections is not None and (a.corrections <= 0 or classifier is None):
        ap.error("--corrections takes minutes (> 0) and a task with a learned reward (push_pixels)")
    if a.catch < 0 or (a.catch and a.corrections is None):
        ap.error("--catch takes frames (> 0) and goes with --corrections")
    if a.on_reject != "end" and a.corrections is None:
        ap.error("--on-reject goes with --corrections")


def operator_stem(a: argparse.Namespace) -> str:
    """The results stem's suffix for the operator's flags."""
    stem = "_corrections" if a.corrections is not None else ""
    stem += "_catch" if a.catch else ""
    return stem + ("_continue" if a.on_reject == "continue" else "")


def verdicts(stores: Sequence[Path]) -> dict[str, int]:
    """The corrections stores' episodes so far by verdict (confirmed, rejected, caught)."""
    from rlinf_data.store import EpisodeStore

    counts = dict.fromkeys(("confirmed", "rejected", "caught"), 0)
    for store in stores:
        if not (store / "episodes").is_dir():
            continue
        s = EpisodeStore(store, mode="r")
        for i in range(len(s)):
            kind = s.info(i).extra.get("correction", "confirmed")
            counts[kind] = counts.get(kind, 0) + 1
    return counts


class Retrainer(threading.Thread):
    """Every ``every_s``, when at least ``min_new`` verdicts arrived in ``stores`` (one per
    robot) since the last round: ``retrain(round) -> metrics`` (the classifier trained and
    pushed); each round's figures in :attr:`rounds`. ``t0``: the robots' start (rounds are
    timed from it)."""

    def __init__(
        self,
        stores: Sequence[Path],
        every_s: float,
        retrain: Callable[[int], dict[str, Any]],
        t0: float,
        min_new: int = 5,
    ) -> None:
        super().__init__(name="classifier-retrainer", daemon=True)
        self.stores, self.every_s, self.retrain, self.t0 = stores, every_s, retrain, t0
        self.min_new = min_new
        self.rounds: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        seen = 0
        while not self._stop_event.wait(self.every_s):
            counts = verdicts(self.stores)
            if sum(counts.values()) - seen < self.min_new:
                continue
            seen = sum(counts.values())
            t = time.time()
            try:
                metrics = self.retrain(len(self.rounds) + 1)
            except (SystemExit, Exception) as e:  # a failed round is reported, the run goes on
                if self._stop_event.is_set():
                    break  # cut short by the run's end (its server is gone): not a failure
                self.errors.append(f"round {len(self.rounds) + 1}: {e}")
                continue
            self.rounds.append(
                {
                    "at_s": round(t - self.t0, 1),
                    **counts,
                    "train_s": round(time.time() - t, 1),
                    **{
                        k: metrics[k]
                        for k in ("val_fp_rate", "val_fn_rate", "val_accuracy", "frames")
                        if isinstance(metrics.get(k), (int, float))
                    },
                    "version": max((metrics.get("pushed") or {0: 0}).values()),
                }
            )
            print(f"classifier retrained: {self.rounds[-1]}", flush=True)

    def stop(self) -> None:
        self._stop_event.set()


def corrections_lines(meta: dict) -> list[str]:
    """The corrections paragraph of the results (none without ``--corrections``)."""
    corr = meta.get("corrections")
    if not corr:
        return []
    fig = meta.get("run_figures") or {}
    rounds = corr.get("rounds", [])
    nan = float("nan")
    per_round = "; ".join(
        f"{r['at_s'] / 60:.1f} min: {r['rejected']} rejected / {r['confirmed']} confirmed / "
        f"{r.get('caught', 0)} caught so far, "
        f"val FP {r.get('val_fp_rate', nan):.3f}, FN {r.get('val_fn_rate', nan):.3f}"
        for r in rounds
    )
    rej, conf, caught = (
        fig.get(f"reward_judge/operator_{k}") for k in ("rejected", "confirmed", "caught")
    )
    catch = corr.get("catch_missed") or 0
    not_yet = (
        " With `reward.on_reject: continue` a rejection did not end the episode: reward 0 and "
        "the episode went on (the operator's 'not yet'), asked again only after the classifier "
        "had said no in between."
        if corr.get("on_reject") == "continue"
        else ""
    )
    caught_line = (
        f"; the operator also pressed the success key on {caught:.0f} successes the classifier "
        f"missed ({catch} frames of success in a row, {catch / 20:.1f} s at 20 Hz; "
        "`reward.catch_missed`), each paid and kept as a positive"
        if catch and caught is not None
        else ""
    )
    return [
        "Corrections: the reward node asked the operator (the twin's judge standing in for a "
        "person's y / n) to confirm each classifier success (`reward.confirm: judge`; the "
        f"classifier's latch loosened to p > {corr.get('threshold')} on "
        f"{corr.get('consecutive')} frames in a row, as a missed success now costs a reward and "
        "a false one a key press); a rejected one paid reward 0"
        + (" and ended the episode" if corr.get("on_reject") != "continue" else "")
        + ", and its frames, like a confirmed one's, "
        "went to the robot's corrections store (`reward.corrections_dir`, one per robot). Every "
        f"{corr['every_min']:g} min with new verdicts, `rlinf train {meta['classifier_config']} "
        "data.extra_stores=[near misses, corrections] push.url=...` retrained the classifier and "
        f"hot-swapped the served one: {len(rounds)} rounds"
        + (f" ({per_round})" if per_round else "")
        + ". Operator verdicts over the run: "
        f"{'n/a' if rej is None else f'{rej:.0f}'} rejected, "
        f"{'n/a' if conf is None else f'{conf:.0f}'} confirmed"
        + caught_line
        + (f"; failed rounds: {corr['errors']}" if corr.get("errors") else "")
        + "."
        + not_yet
    ]
