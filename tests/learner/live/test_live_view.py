"""The live view served and opened in a real headless browser (Debian's Chromium), its token
gate, its loopback default, and the recorder's static copy in the run directory."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from learner.live.config import LiveSection
from learner.live.frames import FrameTap
from learner.live.recorder import INDEX, LIVE_DIR, SNAPSHOT_JSON, LiveRecorder, add_final_eval
from learner.live.server import LiveServer
from learner.live.snapshot import EpisodeRecord, build_snapshot

TOKEN = "live-view-test-token-0123456789"
ROWS = [
    {"iteration": 0, "time/wall_s": 10.0, "updates": 100, "ingest/stored": 100},
    {
        "iteration": 1,
        "time/wall_s": 20.0,
        "updates": 420,
        "ingest/stored": 262,
        "episodes": 12,
        "success_rate": 0.42,
        "weight_version": 37,
        "push/pushes": 12,
        "learner/backlog": 40.0,
        "reward_judge/fp_rate": 0.03,
        "reward_judge/fn_rate": 0.1,
    },
]


def _frame() -> np.ndarray:
    """A colourful 48x64 frame: a screenshot of a page showing it cannot be one flat colour."""
    y, x = np.mgrid[0:48, 0:64]
    return np.stack([x * 4, y * 5, (x + y) * 2], axis=-1).astype(np.uint8)


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium not installed: scripts/bootstrap.sh installs it with the dev extra")
    return exe


def _browse(url: str, tmp: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={tmp / 'profile'}",
        "--window-size=1200,1000",
        *flags,
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90)


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


@pytest.fixture
def server():
    tap = FrameTap()
    tap.offer("robot-a", {"front": _frame()}, seq=7)
    episodes = [EpisodeRecord("robot-a", i, i % 2 == 0, 50, 1.0, 0, 36) for i in range(4)]
    snap = build_snapshot(
        ROWS,
        episodes,
        tap.views(),
        run="live-test",
        reward_source="stream",
        utd_ratio=2.0,
        budget_left_s=750.0,
    )
    with LiveServer(lambda: snap, tap.png, TOKEN, port=0) as srv:
        yield srv


def test_token_is_required_and_loopback_is_the_default(server: LiveServer) -> None:
    assert server.host == LiveSection().host == "127.0.0.1"
    assert server._server.sockets[0].getsockname()[0] == "127.0.0.1"
    base = server.url
    assert _get(base + "healthz")[0] == 200  # for probes, no token
    assert _get(base)[0] == 401
    assert _get(base + "?token=wrong")[0] == 401
    assert _get(base + "snapshot.json", {"Authorization": "Bearer wrong"})[0] == 401
    status, kind, body = _get(base + "snapshot.json", {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and kind == "application/json"
    assert json.loads(body)["policy_version"] == 37
    status, kind, body = _get(f"{base}frames/robot-a/front.png?token={TOKEN}")
    assert status == 200 and kind == "image/png" and body.startswith(b"\x89PNG")
    assert _get(f"{base}frames/robot-a/nope.png?token={TOKEN}")[0] == 404
    assert _get(f"{base}frames/robot-a/front.png")[0] == 401


def test_chromium_shows_the_numbers_and_renders_a_non_blank_page(
    server: LiveServer, tmp_path: Path
) -> None:
    from PIL import Image

    url = f"{server.url}?token={TOKEN}"
    dom = _browse(url, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    assert 'id="success-rate">0.420<' in html
    assert 'id="backlog">40<' in html
    assert 'id="policy-version">v37<' in html
    assert 'id="pushes">12<' in html
    assert 'id="ingest-rate">16.2<' in html and 'id="learner-rate">16.0<' in html
    assert 'id="fp-rate">0.030<' in html and 'id="fn-rate">0.100<' in html
    assert 'id="budget-left">12:30<' in html
    assert "robot-a / front" in html and "safety events" in html.lower()
    shot = tmp_path / "page.png"
    run = _browse(url, tmp_path, f"--screenshot={shot}", "--hide-scrollbars")
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    pixels = np.asarray(Image.open(io.BytesIO(shot.read_bytes())).convert("RGB"))
    assert pixels.shape[:2] == (1000, 1200)
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50  # text, cards and the camera frame


def _transition(robot: str, seq: int) -> SimpleNamespace:
    return SimpleNamespace(robot_id=robot, seq=seq, obs={"images": {"wrist": _frame()}})


def _episode(robot: str, n: int, success: bool) -> SimpleNamespace:
    info = SimpleNamespace(success=success, extra={"robot_id": robot, "robot_episode": n})
    steps = {
        "reward": np.array([0.0, 0.0, float(success)], np.float32),
        "intervention": np.array([False, True, False]),
        "policy_version": np.array([3, 4, 4]),
    }
    return SimpleNamespace(info=info, steps=steps)


def test_recorder_serves_snapshots_and_leaves_a_static_page(tmp_path: Path) -> None:
    lines: list[str] = []
    rows: list[dict] = [ROWS[0]]
    section = LiveSection(enabled=True, port=0, snapshot_every_s=0.1, console_every_s=0.1)
    live = LiveRecorder(
        section,
        TOKEN,
        tmp_path,
        "rec",
        rows=lambda: rows,
        budget_left=lambda: 60.0,
        reward_source="stream",
        utd_ratio=2.0,
        emit=lines.append,
    ).start()
    try:
        live.transition(_transition("r0", 5))
        live.episode(_episode("r0", 0, True))
        live.episode(_episode("r0", 1, False))
        rows.append(ROWS[1])
        status, _, body = _get(live.url + "snapshot.json", {"Authorization": f"Bearer {TOKEN}"})
        got = json.loads(body)
        assert status == 200 and got["policy_version"] == 37 and len(got["recent"]) == 2
        assert got["recent"][1] == {
            "robot_id": "r0",
            "episode": 0,
            "success": True,
            "steps": 3,
            "ret": 1.0,
            "interventions": 1,
            "policy_version": 4,
        }
        deadline = time.monotonic() + 20
        while not any("v37" in line for line in lines):  # the thread's console line
            assert time.monotonic() < deadline, lines
            time.sleep(0.05)
    finally:
        live.stop()
    root = tmp_path / LIVE_DIR
    final = json.loads((root / SNAPSHOT_JSON).read_text())
    assert final["finished"] and final["episodes"] == 12
    assert (root / "frames" / "r0__wrist.png").read_bytes().startswith(b"\x89PNG")
    assert 'src="frames/r0__wrist.png"' in (root / INDEX).read_text()
    assert lines[-1].endswith("finished")
    add_final_eval(tmp_path, {"train": {"success_rate": 0.75}})
    page = (root / INDEX).read_text()
    assert "train/success_rate" in page and "0.750" in page
    assert add_final_eval(tmp_path / "elsewhere", {}) is None
