"""The operator's corrections of the learned reward during a twin run (``ros_online_rlpd.py
--corrections MIN``): the reward node asks the twin's judge (the operator's stand-in) to confirm
each classifier success (``reward.confirm: judge``) and keeps the frames of each verdict
(``reward.corrections_dir``); every ``MIN`` minutes with new verdicts, :class:`Retrainer` runs the
shipped command that retrains the classifier on the demos, the near misses and the corrections and
pushes it to the served classifier (``rlinf train configs/reward_classifier_push.yaml
data.extra_stores=[..., corrections] push.url=ws://...``), the command an operator would run by
hand every few minutes. :func:`corrections_lines` is the results paragraph.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def verdicts(store: Path) -> tuple[int, int]:
    """(confirmed, rejected) episodes in the corrections store so far (none: (0, 0))."""
    if not (store / "episodes").is_dir():
        return 0, 0
    from rlinf_data.store import EpisodeStore

    s = EpisodeStore(store, mode="r")
    ok = sum(bool(s.info(i).success) for i in range(len(s)))
    return ok, len(s) - ok


class Retrainer(threading.Thread):
    """Every ``every_s``, when at least ``min_new`` verdicts arrived since the last round:
    ``retrain(round) -> metrics`` (the classifier trained and pushed); each round's figures in
    :attr:`rounds`. ``t0``: the robots' start (rounds are timed from it)."""

    def __init__(
        self,
        store: Path,
        every_s: float,
        retrain: Callable[[int], dict[str, Any]],
        t0: float,
        min_new: int = 5,
    ) -> None:
        super().__init__(name="classifier-retrainer", daemon=True)
        self.store, self.every_s, self.retrain, self.t0 = store, every_s, retrain, t0
        self.min_new = min_new
        self.rounds: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        seen = 0
        while not self._stop_event.wait(self.every_s):
            confirmed, rejected = verdicts(self.store)
            if confirmed + rejected - seen < self.min_new:
                continue
            seen = confirmed + rejected
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
                    "confirmed": confirmed,
                    "rejected": rejected,
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
        f"{r['at_s'] / 60:.1f} min: {r['rejected']} rejected / {r['confirmed']} confirmed so far, "
        f"val FP {r.get('val_fp_rate', nan):.3f}, FN {r.get('val_fn_rate', nan):.3f}"
        for r in rounds
    )
    rej, conf = (
        fig.get("reward_judge/operator_rejected"),
        fig.get("reward_judge/operator_confirmed"),
    )
    return [
        "Corrections: the reward node asked the operator (the twin's judge standing in for a "
        "person's y / n) to confirm each classifier success (`reward.confirm: judge`; the "
        f"classifier's latch loosened to p > {corr.get('threshold')} on "
        f"{corr.get('consecutive')} frames in a row, as a missed success now costs a reward and "
        "a false one a key press); a rejected "
        "one ended the episode as a failure (reward 0) and its frames, like a confirmed one's, "
        "went to the corrections store (`reward.corrections_dir`). Every "
        f"{corr['every_min']:g} min with new verdicts, `rlinf train {meta['classifier_config']} "
        "data.extra_stores=[near misses, corrections] push.url=...` retrained the classifier and "
        f"hot-swapped the served one: {len(rounds)} rounds"
        + (f" ({per_round})" if per_round else "")
        + ". Operator verdicts over the run: "
        f"{'n/a' if rej is None else f'{rej:.0f}'} rejected, "
        f"{'n/a' if conf is None else f'{conf:.0f}'} confirmed"
        + (f"; failed rounds: {corr['errors']}" if corr.get("errors") else "")
        + "."
    ]
