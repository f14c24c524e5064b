"""The live view of a real run, in a real browser: ``rlinf online`` on the push twin with
``live.enabled``, the served page opened in headless Chromium while the robot learns, and the
static copy the run leaves checked against the run's ``metrics.json``.

"Equal" here means *the same row*: the static copy (``<out_dir>/live/snapshot.json`` and the
numbers of ``index.html`` as Chromium renders them) is built from the final row of
``metrics.json``'s ``history`` -- its ``iteration`` is that row's -- and every figure below is
that row's value (on the page: formatted as the page formats it). ``metrics.json``'s ``final``
starts from that same row, so it carries the same values.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("rclpy", reason="needs the ros extra (ros-kilted-* wheels)")
pytest.importorskip("mujoco", reason="needs the sim extra")

from online_rig import TINY_ONLINE_LEARNER, online_push

pytestmark = [pytest.mark.slow, pytest.mark.ros, pytest.mark.sim, pytest.mark.timeout(900)]

BUDGET_S = 150  # the learner's: the run ends by itself, a minute or so after robots stream
LEARNER = (
    f"learner:train.time_budget_s={BUDGET_S}",
    *TINY_ONLINE_LEARNER,
    "learner:push.every_updates=20",
    "learner:live.enabled=true",
    "learner:live.port=0",
    "learner:live.snapshot_every_s=1",
    "learner:live.console_every_s=1",
    "server:--torch-threads=1",
)
# page element id -> (metrics row key, how the page writes it)
FIGURES: dict[str, tuple[str, Callable[[float], str]]] = {
    "episodes": ("episodes", lambda v: str(int(v))),
    "success-rate": ("success_rate", lambda v: format(v, ".3f")),
    "policy-version": ("weight_version", lambda v: f"v{int(v)}"),
    "pushes": ("push/pushes", lambda v: str(int(v))),
    "ingest-stored": ("ingest/stored", lambda v: str(int(v))),
    "updates": ("updates", lambda v: str(int(v))),
}
# snapshot.json key -> metrics row key
SNAPSHOT_KEYS = {
    "iteration": "iteration",
    "episodes": "episodes",
    "success_rate": "success_rate",
    "policy_version": "weight_version",
    "pushes": "push/pushes",
    "ingest_stored": "ingest/stored",
    "updates": "updates",
    "env_steps": "env_steps",
}
LIVE_URL = re.compile(r"live view on (http://\S+/)")


def chromium(url: str, tmp: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium not installed: scripts/bootstrap.sh installs it with the dev extra")
    cmd = [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={tmp / 'chromium-profile'}",
        "--window-size=1200,900",
        *flags,
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def page_numbers(url: str, tmp: Path) -> dict[str, str]:
    """Element id -> text of every number the page shows, as Chromium's DOM has it."""
    dom = chromium(url, tmp, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    return dict(re.findall(r'id="([\w-]+)">([^<]*)<', dom.stdout))


def logs(run: Path, out: Path) -> str:
    parts = [out.read_text(errors="replace")[-3000:]]
    parts += [
        f"==== {f.name}\n{f.read_text(errors='replace')[-2500:]}"
        for f in sorted((run / "logs").glob("*.log"))
    ]
    return "\n".join(parts)


def wait_for(cond: Callable[[], Any], timeout: float, what: str, proc: subprocess.Popen) -> Any:
    """``cond()``'s first truthy value, polled while the run is alive."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        got = cond()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"no {what} (exit code {proc.poll()}, or {timeout} s passed)")


def live_url(run: Path) -> str | None:
    log = run / "logs" / "learner.log"
    m = LIVE_URL.search(log.read_text(errors="replace")) if log.is_file() else None
    return m.group(1) if m else None


def test_live_page_during_a_twin_run_and_its_static_copy_match_metrics(
    tmp_path: Path, ros_domain_id: int, monkeypatch
) -> None:
    proc, run, out = online_push(tmp_path, monkeypatch, *LEARNER)
    try:
        running = during_the_run(run, tmp_path, proc)
        rc = proc.wait(timeout=BUDGET_S + 300)  # the learner's budget ends the run
    except BaseException as e:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        raise AssertionError(f"{e}\n{logs(run, out)}") from e
    assert rc == 0, logs(run, out)
    assert "learner finished (its budget)" in out.read_text(), logs(run, out)
    metrics = json.loads((run / "metrics.json").read_text())
    row, final = metrics["history"][-1], metrics["final"]
    assert int(running["episodes"]) <= row["episodes"]  # the live page showed an earlier row
    static_copy_is_the_final_row(run / "live", row, final, tmp_path)


def during_the_run(run: Path, tmp: Path, proc: subprocess.Popen) -> dict[str, str]:
    """The served page, polled in Chromium until it shows robot episodes; a screenshot of it."""
    url = wait_for(lambda: live_url(run), 600, "live view URL in the learner's log", proc)
    token = (tmp / "secrets" / "ingest_token").read_text().strip()
    page = f"{url}?token={token}"

    def episodes_shown() -> dict[str, str] | None:
        nums = page_numbers(page, tmp)
        return nums if nums.get("episodes", "0").isdigit() and int(nums["episodes"]) > 0 else None

    nums = wait_for(episodes_shown, 600, "robot episodes on the live page", proc)
    assert nums["state"] == "running" and nums["policy-version"].startswith("v"), nums
    shot = tmp / "live_view_run.png"
    taken = chromium(page, tmp, f"--screenshot={shot}", "--hide-scrollbars")
    assert taken.returncode == 0 and shot.stat().st_size > 10_000, taken.stderr[-2000:]
    return nums


def static_copy_is_the_final_row(
    live: Path, row: dict[str, Any], final: dict[str, Any], tmp: Path
) -> None:
    snap = json.loads((live / "snapshot.json").read_text())
    assert snap["finished"], snap
    assert row["episodes"] > 0 and row["ingest/stored"] > 0, row
    assert snap["iteration"] == row["iteration"] == final["iterations"] - 1  # the last row
    for key, row_key in SNAPSHOT_KEYS.items():
        assert snap[key] == row[row_key], (key, snap[key], row[row_key])
        if row_key != "iteration":  # final counts rows instead ("iterations")
            assert final[row_key] == row[row_key], (row_key, final[row_key], row[row_key])
    # the per-robot tallies count the same episodes as the row
    assert sum(r["episodes"] for r in snap["robots"]) == row["episodes"], snap["robots"]
    nums = page_numbers((live / "index.html").resolve().as_uri(), tmp)
    assert nums["state"] == "finished", nums
    shown = {ident: nums.get(ident) for ident in FIGURES}
    assert shown == {ident: fmt(row[key]) for ident, (key, fmt) in FIGURES.items()}, row
