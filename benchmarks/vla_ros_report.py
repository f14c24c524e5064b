"""The report of benchmarks/vla_ros.py: ``results/<stem>.{json,md}`` from a run's meta and
rows.

Split out of vla_ros.py so the rendering (also the ``--from-json`` path) lives apart from the
evals; vla_ros.py imports :func:`render` (benchmarks/ is on its sys.path).
"""

from __future__ import annotations

import shlex
from typing import Any

from bench_results import write_table


def _checkpoint_given(meta: dict[str, Any]) -> bool:
    """Whether the run evaluated a given checkpoint (``--checkpoint``) rather than SFT one."""
    return any(a.split("=")[0] == "--checkpoint" for a in shlex.split(meta.get("command", "")))


def render(stem: str, meta: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """``results/<stem>.{json,md}`` from a run's meta and rows (also the ``--from-json`` path)."""
    replay = meta["replay"]
    lock, rt, late = replay["lockstep"], replay["realtime"], replay["realtime_obs_1_step_old"]
    sim = rows[0]
    twins = [r for r in rows if r["path"].startswith("ROS 2 twin")]
    checkpoint = (
        f"One small-VLA checkpoint (`{meta['checkpoint']}`, given with `--checkpoint`) "
        if _checkpoint_given(meta)
        else f"One small-VLA checkpoint (`vla_tokens`, SFT {meta['sft_steps']} steps on oracle "
        "demos of `franka_language/mix`, 64 px front camera, MiniLM instruction embedding) "
    )
    intro = [
        checkpoint + f"evaluated on split `{meta['split']}`, "
        f"{meta['episodes']} held-out episodes each way, same seeds. `benchmarks/vla_ros.py`.",
        f"**Verdict: {meta['verdict']}.**",
        "`sim`: `rlinf eval` with the model in process. `served`: `rlinf serve --checkpoint` in "
        "its own process and `rlinf eval`'s loop on the same held-out episodes with every action "
        "from the server (per sub-env one connection sending state + image + instruction in the "
        "canonical observation map).",
        "`ROS 2 twin`: `rlinf serve --checkpoint` + `configs/ros_sim_franka_language.yaml` as "
        "processes on one DDS domain: the robot node's MuJoCo arm runs the franka_language env's "
        "own scene (objects, per-episode colours, instruction, success test) and publishes joints, "
        "EE pose, the object slots (PoseArray) and the 64 px front camera; the task node resets "
        "the scene per episode and relays the instruction; the policy client builds the 33-D "
        "state from topics and sends state + image + instruction to the server. The twin replays "
        "the sim eval's episodes (scene_seed = eval.seed_offset), so `sim` and each twin run are "
        "paired episode by episode. The twin runs in **lock-step** (`robot.scene.lockstep`, "
        "`policy_client.lockstep`): each observation set goes out under one stamp, the command "
        "answering it carries that stamp, and the robot node then advances the physics exactly "
        "one simulator control step (10 x 5 ms) with the target applied at once "
        "(`robot_drivers.lockstep.LockstepStepper`); episodes are scored by the twin's own step "
        "count (first success within 40 steps, as `terminate_on_success`).",
        "Why lock-step (measured, open-loop replay of sim eval episode 1: the checkpoint's own "
        "actions replayed on the twin's arm, the observation the client would build compared with "
        "the simulator's each step): lock-step: observations identical (state to 1e-4, every "
        "pixel) after each of the first "
        f"{(lock['first_step_off'] or lock['steps'] + 1) - 1} of {lock['steps']} steps; the first "
        "difference follows the first command the safety layer changed (step "
        f"{lock['first_safety_step']}; its events in lock-step: "
        f"{lock['safety_events'] or 'none'}: the workspace box shortens moves toward the table "
        "that the simulator, which has no such box, makes), max |state diff| "
        f"{lock['state_err_max']:.3f} and mean |pixel diff| {lock['pixel_err_mean']:.2f} over "
        "the episode; the real-time robot node's execution (one-point trajectory ramped over the "
        "period by the 100 Hz driver, safety speed limit per 10 ms tick): "
        f"{rt['state_err_step1']:.3f} after the first step, {rt['state_err_max']:.3f} max, pixels "
        f"{rt['pixel_err_mean']:.2f}, safety events {rt['safety_events']}; acting on the "
        f"observation one step old as well: {late['state_err_max']:.3f} max, pixels "
        f"{late['pixel_err_mean']:.2f}. (Max over the 33 state entries: metres, radians, rad/s.)",
        f"Per episode (1 = success): sim `{sim['per_episode']}`; "
        + "; ".join(
            f"twin run {k + 1} `{t['per_episode']}` (agrees with sim on {t['paired_with_sim']})"
            for k, t in enumerate(twins)
        )
        + ".",
    ]
    cols = [
        ("path", lambda r: r["path"]),
        ("success", lambda r: f"{r['success_rate']:.3f}"),
        ("episodes", lambda r: r["episodes"]),
        ("wall s", lambda r: f"{r['wall_s']:.0f}"),
        ("load", lambda r: r["load_1min"]),
    ]
    write_table(
        stem,
        "Small VLA: in-process sim eval vs served over the wire vs the ROS 2 twin",
        intro,
        meta,
        rows,
        cols,
    )
