"""The live view in the ingesting learner: its config section, the start helper of
``learner.offpolicy.remote`` and the episode records of the ingest's own episodes."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from learner.live.recorder import record
from learner.offpolicy.config import OffPolicyConfig
from learner.offpolicy.remote import Segments, _live
from rlinf_contracts.config import ConfigError, from_dict
from rlinf_contracts.episode import StepLayout
from rlinf_data.ingest import IngestedTransition

TOKEN = "ingest-token-for-the-live-view-0123"


def _cfg(tmp_path: Path, **sections) -> OffPolicyConfig:
    return from_dict(OffPolicyConfig, {"train": {"out_dir": str(tmp_path / "run")}, **sections})


def test_live_needs_the_ingest_and_names_its_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="live.enabled"):
        _cfg(tmp_path, live={"enabled": True})
    with pytest.raises(ConfigError, match="live.snapshot_every_s"):
        _cfg(tmp_path, live={"snapshot_every_s": -1})
    assert _cfg(tmp_path).live.enabled is False  # off unless asked


def test_learner_starts_the_view_with_the_ingest_token(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("RLINF_INGEST_TOKEN", raising=False)
    monkeypatch.delenv("RLINF_INGEST_TOKEN_FILE", raising=False)
    token_file = tmp_path / "ingest.token"
    token_file.write_text(TOKEN)
    cfg = _cfg(
        tmp_path,
        ingest={"enabled": True, "token_file": str(token_file), "reward": "stream"},
        live={"enabled": True, "port": 0},
    )
    off = _cfg(tmp_path)
    stand_in: Any = SimpleNamespace()  # not touched when the view is off
    assert _live(off, stand_in, stand_in) is None
    loop = SimpleNamespace(
        history=[{"iteration": 0, "time/wall_s": 1.0, "weight_version": 3}], budget=None
    )
    feed = SimpleNamespace(live=None)
    live = _live(cfg, loop, feed)  # type: ignore[arg-type]  # stand-ins with the used attributes
    try:
        assert feed.live is live and live.url.startswith("http://127.0.0.1:")
        req = urllib.request.Request(
            live.url + "snapshot.json", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            got = json.loads(r.read())
        assert got["policy_version"] == 3 and got["reward_source"] == "stream"
    finally:
        live.stop()
    assert (Path(cfg.train.out_dir) / "live" / "index.html").is_file()


def test_episode_record_of_an_ingested_segment() -> None:
    seg = Segments(StepLayout(3, 2), "toy/point_reach", None, 10.0)
    eps = []
    for seq in range(3):
        last = seq == 2
        t = IngestedTransition(
            "r7",
            seq,
            "online",
            {"state": np.zeros(3, np.float32), "images": {}},
            np.zeros(2, np.float32),
            float(last),
            last,
            False,
            seq == 1,
            5 + seq,
            {"state": np.zeros(3, np.float32), "images": {}},
            4,
            last,
            True if last else None,
        )
        eps += seg.add(t)
    (ep,) = eps
    assert record(ep).__dict__ == {
        "robot_id": "r7",
        "episode": 4,
        "success": True,
        "steps": 3,
        "ret": 1.0,
        "interventions": 1,
        "policy_version": 7,
    }
