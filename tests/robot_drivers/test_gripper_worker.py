"""The gripper worker's protocol against a fake hand in a real worker process (spawn): commands
never wait, the newest wins, the state follows, a dead worker is a clear error (and, on the
libfranka backend, a ``gripper_lost`` error of the arm), and nothing outlives a shutdown.

The fake (tests/robot_drivers/fake_gripper.py) journals every call to a file: the order of the
lines is what the worker ran. Its motions hold the GIL like pylibfranka's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from robot_drivers.arm import DriverError, FrankaArm
from robot_drivers.gripper_worker import GripperLost, GripperWorker
from robot_drivers.libfranka_arm import LibfrankaArmBackend, ProcessGripper
from robot_drivers.types import RobotMode
from tests.robot_drivers.test_driver_backends import _fake_pylibfranka

FAKE = "tests.robot_drivers.fake_gripper:FakeGripper"
ROOT = Path(__file__).resolve().parents[2]


def until(cond: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"not within {timeout_s:.0f} s: {what}")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) counts as gone
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[1].startswith("Z"))


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    return tmp_path / "hand.log"


@pytest.fixture
def worker(journal: Path) -> Iterator[GripperWorker]:
    w = GripperWorker(str(journal), poll_s=0.02, gripper_class=FAKE)
    w.start()
    yield w
    w.close()


def lines(journal: Path) -> list[str]:
    return journal.read_text().splitlines()


def test_commands_return_at_once_and_the_state_follows(worker: GripperWorker) -> None:
    first = worker.snapshot()
    assert first.state.width == pytest.approx(0.04) and first.state.max_width == 0.08
    assert first.temperature == 31 and not first.busy
    cmd = worker.send("move", 0.07, 0.1)  # 0.3 s of motion
    assert not worker.wait(cmd, timeout_s=0.0)  # sent, not done: send did not wait
    until(lambda: worker.snapshot().busy, "the worker reports the move running")
    assert worker.wait(cmd, timeout_s=10.0)
    snap = worker.snapshot()
    assert snap.state.width == pytest.approx(0.07) and snap.done_id == cmd and snap.done_ok
    assert not snap.busy and snap.error == ""


def test_the_newest_command_wins(worker: GripperWorker, journal: Path) -> None:
    """Commands sent while a motion runs: only the newest runs after it; the others are
    superseded (their wait answers False)."""
    first = worker.send("move", 0.0, 0.1)  # 0.4 s
    until(lambda: worker.snapshot().running_id == first, "the first move running")
    superseded = [worker.send("move", w, 0.2) for w in (0.01, 0.02, 0.03)]
    last = worker.send("move", 0.06, 0.2)
    assert worker.wait(last, timeout_s=10.0)
    assert worker.wait(first, timeout_s=0.0)
    assert not any(worker.wait(c, timeout_s=0.0) for c in superseded)
    assert lines(journal) == ["open", "move 0", "move 0.06"]
    assert worker.snapshot().state.width == pytest.approx(0.06)


def test_a_failed_command_reports_why_and_the_worker_goes_on(worker: GripperWorker) -> None:
    assert not worker.wait(worker.send("move", -0.01, 0.1), timeout_s=10.0)
    assert "CommandException: width out of range" in worker.snapshot().error
    assert not worker.wait(worker.send("grasp", 0.02, 0.1, 20.0, 0.01, 0.01), timeout_s=10.0)
    assert "reported failure" in worker.snapshot().error
    assert worker.wait(worker.send("homing"), timeout_s=10.0)
    assert worker.snapshot().state.width == pytest.approx(0.08)


def test_death_is_a_clear_error_on_the_next_call(worker: GripperWorker) -> None:
    worker.send("grasp", 0.0, 0.1, 666.0, 0.01, 0.01)  # the fake ends its process mid-grasp
    until(lambda: not worker.alive, "the worker ended")
    with pytest.raises(GripperLost, match="exited with code 9"):
        worker.snapshot()
    with pytest.raises(GripperLost, match="exited with code 9"):
        worker.send("move", 0.05, 0.1)
    assert worker.last.state.width == pytest.approx(0.04)  # what it last published


def test_a_hand_that_does_not_answer_fails_start_clearly(tmp_path: Path) -> None:
    w = GripperWorker(str(tmp_path / "hand.refuse"), gripper_class=FAKE)
    with pytest.raises(GripperLost, match=r"NetworkException: no gripper at .*hand\.refuse"):
        w.start()
    assert w.pid is None


def test_unknown_command_is_refused_without_side_effects(worker: GripperWorker) -> None:
    with pytest.raises(DriverError, match="use one of"):
        worker.send("wave")
    assert worker.snapshot().done_id == 0


def test_close_leaves_no_process_even_mid_motion(journal: Path) -> None:
    w = GripperWorker(str(journal), gripper_class=FAKE)
    w.start()
    pid = w.pid
    assert pid is not None
    w.send("move", 0.0, 0.001)  # a 40 s motion: close cannot wait for it
    until(lambda: w.snapshot().busy, "the long move running")
    w.close(timeout_s=0.5)
    assert not pid_alive(pid) and w.pid is None


def test_the_worker_ends_when_the_control_process_dies(tmp_path: Path) -> None:
    """No orphan: the control process killed (no cleanup runs), its worker ends on its own."""
    journal = tmp_path / "hand.log"
    script = (
        "import os, sys, time\n"
        "from robot_drivers.gripper_worker import GripperWorker\n"
        f"w = GripperWorker({str(journal)!r}, poll_s=0.02, gripper_class={FAKE!r})\n"
        "w.start()\n"
        "print(w.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        assert pid_alive(pid)
        parent.kill()
        parent.wait(timeout=10)
        until(lambda: not pid_alive(pid), f"worker {pid} gone after its parent was killed")
    finally:
        parent.kill()
        parent.wait(timeout=10)


# ---- on the libfranka backend ------------------------------------------------------------------
def test_libfranka_backend_gripper_process_and_lost_gripper(monkeypatch, journal: Path) -> None:
    """The backend's gripper commands return at once; a dead worker is a gripper_lost error of
    the arm (motion refused, no exception), and recover() starts a fresh worker."""
    fr = _fake_pylibfranka()
    monkeypatch.setitem(sys.modules, "pylibfranka", fr)
    backend = LibfrankaArmBackend(str(journal), gripper_class=FAKE, gripper_poll_s=0.02)
    arm = FrankaArm(backend)
    link = backend.gripper
    assert isinstance(link, ProcessGripper)  # the default
    arm.connect()
    try:
        pid = link.worker.pid
        assert pid is not None and pid != os.getpid()
        assert arm.gripper_move(0.02, 0.1)  # accepted: the move runs in the worker
        assert arm.gripper_wait(10.0)
        assert arm.gripper_state().width == pytest.approx(0.02)

        arm.gripper_grasp(0.0, 0.1, force=666.0)  # the worker dies mid-grasp
        until(lambda: bool(arm.state().errors), "the arm reports the lost gripper")
        st = arm.state()
        assert st.mode == RobotMode.REFLEX and "exited with code 9" in st.errors[0]
        assert st.errors[0].startswith("gripper_lost: ")
        assert arm.move_joints(st.q).refused  # the safety path holds the arm
        assert not arm.gripper_move(0.05) and not arm.gripper_wait(1.0)
        arm.estop("test")  # stops the gripper too: must not raise with the worker gone
        arm.reset_estop()

        assert arm.recover()
        assert arm.state().errors == () and link.worker.pid != pid
        assert arm.gripper_move(0.05, 0.1) and arm.gripper_wait(10.0)
        assert arm.gripper_state().width == pytest.approx(0.05)
        pid = link.worker.pid
    finally:
        arm.disconnect()
    assert pid is not None and not pid_alive(pid)
