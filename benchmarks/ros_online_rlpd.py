"""Online RLPD on the ROS 2 sim twin: robot node -> policy server -> streamer -> learner -> weights
-> policy server, from 20 scripted-teleop demos. Held-out success vs wall time.

    .venv/bin/python benchmarks/ros_online_rlpd.py [--task reach|push|insert|push_pixels|...]
                                                   [--demos 20] [--minutes 20] [--eval-episodes 50]

``--task`` picks the twin graph, learner config and scripted human (:data:`TASKS`): reach
(configs/ros_sim_franka.yaml + ros_online_rlpd.yaml), push (the push twin,
configs/ros_sim_franka_push.yaml + ros_online_rlpd_push.yaml, the scripted pusher,
``teleop.script.task: push``), insert (peg insertion under Cartesian impedance control,
configs/ros_sim_franka_insert.yaml + ros_online_rlpd_insert.yaml, the scripted inserter,
``teleop.script.task: insert``) or push_pixels (camera-only push with a learned reward,
configs/ros_sim_franka_push_pixels.yaml + ros_online_rlpd_push_pixels.yaml: front + wrist
cameras, no object pose; see "Camera-only push" below).

Every piece runs as the shipped commands, as real processes (random ROS_DOMAIN_ID):

1. ``rlinf collect GRAPH.yaml --episodes 20`` on the twin (MuJoCo Panda robot node, policy client
   without a server, the ``scripted`` teleop device driving every tick, task judge, recorder).
2. ``rlinf train configs/ros_online_rlpd.yaml`` (learner + ingest + weight push): pretrains on the
   demos, writes ``initial``; ``rlinf serve --checkpoint .../initial server.deterministic=false``;
   the twin graph with the streamer on (``rlinf_ros.nodes.*``: robot, policy client, task in
   endless mode, streamer). The learner stops at its time budget (``--minutes``).
3. Held-out success of the initial actor (the demos-only level) and of every checkpoint the
   learner wrote (each ``train.checkpoint_every`` transitions), deterministic, on the simulator
   of the same task (same scene and physics as the twin, seeds the twin never saw), after the
   run so the evaluation takes no CPU from it. Wall time = checkpoint time - robot start.

Camera-only push (``push_pixels``) adds, between 1. and 2.: the frozen pixel encoder
(``runs/encoder_pretrain_front`` when it holds a checkpoint, else a quick ``rlinf train
configs/encoder_pretrain.yaml`` on the demos' front + wrist frames), episodes of the scripted
human with noise on its commands (near misses: the classifier's negatives), the success classifier
(``rlinf train configs/reward_classifier_push.yaml`` on the demos and those, reading the same frozen
backbone as the learner) served by ``rlinf serve`` on
the reward node's port, and the reward node in the graph (``source: classifier``; the twin's
judge only scores it). The results add the classifier's FP / FN rates against the twin's judge
(the learner's ``reward_judge/*``) and ``learner/transitions_trained_share``. ``push_pixels_judge``
is its control: the same graph and learner with the twin's judge as the reward, no classifier.
The operator's flags (``--corrections``, ``--catch``, ``--on-reject``) are
``ros_online_rlpd_corrections``'s.

Writes benchmarks/results/<stem>.{md,json,png}; prints the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import yaml
from ros_bench_env import prepare

from rlinf_ros.domains import free_domains

ROOT = prepare()

from bench_results import RESULTS, load, machine_meta  # noqa: E402
from online_rig import (  # noqa: E402
    RLINF,
    TOKENS,
    learner_args,
    start_server,
    wait_for,
)
from ros_online_rlpd_corrections import (  # noqa: E402
    CONFIRMED_LATCH,
    Retrainer,
    add_operator_arguments,
    check_operator_arguments,
    corrections_store,
    operator_reward,
    operator_stem,
)
from ros_online_rlpd_heldout import checkpoints, heldout, judge, sim_task  # noqa: E402
from ros_online_rlpd_render import plot, render  # noqa: E402
from ros_online_rlpd_tasks import TASKS  # noqa: E402
from ros_procs import Procs, free_port  # noqa: E402

TASK = TASKS["reach"]
HUMAN_PATIENCE_S: float | None = None  # --human: the scripted human watching the online run
CORRECTIONS_MIN: float | None = None  # --corrections: the operator's verdicts, retrain period
CATCH_FRAMES = 0  # --catch: the operator's success key on a success the classifier missed
ON_REJECT = "end"  # --on-reject: what the operator's rejection does (reward.on_reject)
BC_WEIGHT = 0.0  # --bc-weight: the learner's algorithm.bc_weight
CORRECTIONS: dict = {}  # the retraining rounds of this run (results)


def merge(base: dict, over: dict) -> dict:
    """``over`` into ``base`` key by key (nested sections merge, values replace)."""
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            merge(base[k], v)
        else:
            base[k] = v
    return base


def task_base() -> dict:
    cfg = yaml.safe_load((ROOT / TASK.graph).read_text())
    if TASK.action:
        cfg["policy_client"]["robot_spec"]["action"].update(TASK.action)
    return cfg


def task_graph(
    work: Path, server_port: int, ingest_port: int, reward_port: int | None, robot: int = 0
) -> Path:
    """Robot ``robot``'s twin graph of the online run: policy server, endless episodes, streamer
    on (its own robot id and spool), the reward node asking the classifier served on
    ``reward_port``. Each robot draws its own episodes (task seed), so a fleet does not repeat
    one robot's scenes."""
    cfg = merge(task_base(), TASK.online_graph)
    if reward_port is not None:
        cfg["reward"]["server_url"] = f"ws://127.0.0.1:{reward_port}"
    if CORRECTIONS_MIN is not None:  # the twin's judge confirms each classifier success
        operator_reward(cfg["reward"], corrections_store(work, robot), CATCH_FRAMES, ON_REJECT)
    cfg["policy_client"].update(server_url=f"ws://127.0.0.1:{server_port}", reconnect_s=0.3)
    seed = int(cfg["task"].get("seed", 0)) + 1000 * robot
    results = work / ("episodes.json" if robot == 0 else f"episodes_twin{robot}.json")
    cfg["task"].update(episodes=0, results_path=str(results), seed=seed)
    cfg["streamer"] = {
        "enabled": True,
        "stream": {
            "url": f"ws://127.0.0.1:{ingest_port}/transitions",
            "robot_id": f"twin{robot}",
            "spool_dir": str(work / "spool" / f"twin{robot}"),
            "backoff_s": 0.2,
            "backoff_max_s": 1.0,
        },
        "episodes": {"source": "online"},
    }
    if HUMAN_PATIENCE_S is not None:  # HIL-SERL's operator: takes over when the task stalls
        cfg["teleop"] = {
            "enabled": True,
            "device": "scripted",
            "rate_hz": 20.0,
            "always_intervene": False,
            "script": {"task": TASK.script, "patience_s": HUMAN_PATIENCE_S, "seed": robot},
        }
    path = work / ("graph.yaml" if robot == 0 else f"graph_twin{robot}.yaml")
    path.write_text(yaml.safe_dump(cfg))
    return path


def collect_demos(work: Path, n: int, procs: Procs, out: str = "demos", noise: float = 0.0) -> dict:
    """``rlinf collect`` on the twin with the scripted human driving every tick (``noise``: an
    operator who misses, for the classifier's near-miss negatives)."""
    cfg = merge(task_base(), TASK.demo_graph)
    cfg["task"].update(results_path=str(work / "demo_episodes.json"), warmup_s=2.0)
    cfg["policy_client"]["server_url"] = ""
    cfg["teleop"] = {
        "enabled": True,
        "device": "scripted",
        "rate_hz": 20.0,
        "always_intervene": True,
        "script": {"task": TASK.script, **({"noise": noise, "seed": 1} if noise else {})},
    }
    graph = work / f"graph_{out}.yaml"
    graph.write_text(yaml.safe_dump(cfg))
    t0 = time.time()
    run_logged(
        work / "collect.log",
        ["collect", str(graph), "--episodes", str(n), "--out", str(work / out)],
        120 + 40 * n,
    )
    from rlinf_data.store import EpisodeStore

    eps = [e for e in EpisodeStore(work / out, mode="r") if e.info.status != "aborted" and len(e)]
    return {
        "episodes": len(eps),
        "successes": int(sum(e.info.success for e in eps)),
        "steps": int(sum(len(e) for e in eps)),
        "collect_s": round(time.time() - t0, 1),
    }


def run_logged(log: Path, args: list[str], timeout: float) -> None:
    """One ``rlinf`` command to completion, its output appended to ``log``."""
    with open(log, "ab") as f:
        rc = subprocess.run(
            [RLINF, *args], cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, timeout=timeout
        ).returncode
    if rc != 0:
        raise SystemExit(f"rlinf {args[0]} exited {rc}; see {log}")


def has_checkpoint(run_dir: Path) -> bool:
    return any((run_dir / "checkpoints").glob("*/model.safetensors"))


def encoder_weights(work: Path) -> list[str]:
    """The learner's ``model.encoder.weights`` override: the preferred pretrained encoder when it
    exists, else a quick one pretrained here on the demos' frames (none for state tasks)."""
    enc = TASK.encoder
    if enc is None:
        return []
    preferred = ROOT / enc.weights
    if has_checkpoint(preferred):
        return [f"model.encoder.weights={preferred}"]
    out = work / "encoder"
    cams = ",".join(enc.cameras)
    t0 = time.time()
    run_logged(
        work / "encoder.log",
        [
            "train",
            str(ROOT / enc.config),
            f"data.stores=[{work / 'demos'}]",
            f"data.action_stores=[{work / 'demos'}]",
            f"data.cameras=[{cams}]",
            f"train.updates={enc.quick_updates}",
            f"train.out_dir={out}",
        ],
        1800,
    )
    print(
        f"encoder: {enc.weights} absent, pretrained {out} in {time.time() - t0:.0f} s", flush=True
    )
    return [f"model.encoder.weights={out}"]


def train_classifier(
    work: Path,
    backbone: list[str],
    out_name: str = "classifier",
    push_port: int | None = None,
    corrections: tuple[Path, ...] = (),
) -> dict:
    """``rlinf train`` of the task's success classifier on the demos' frames and the noisy
    teleop's near misses (and, retrained during the run, the operators' ``corrections`` stores,
    pushed to the classifier served on ``push_port``), on the learner's frozen backbone; its
    metrics."""
    out = work / out_name
    extra = [str(work / "rollouts")] * bool(TASK.negatives)
    extra += [str(c) for c in corrections if (c / "episodes").is_dir()]
    weights = [f"model.backbone={b.split('=', 1)[1]}" for b in backbone]
    push = [f"push.url=ws://127.0.0.1:{push_port}"] * (push_port is not None)
    run_logged(
        work / "classifier.log",
        [
            "train",
            str(ROOT / TASK.classifier),
            f"data.store={work / 'demos'}",
            f"data.extra_stores=[{','.join(extra)}]",
            *weights,
            *push,
            f"train.out_dir={out}",
        ],
        900,
    )
    final = json.loads((out / "metrics.json").read_text()).get("final", {})
    return {k: v for k, v in final.items() if isinstance(v, (int, float)) or k == "pushed"}


def serve_classifier(work: Path, procs: Procs) -> int:
    """``rlinf serve`` of the trained classifier on a free port (the reward node's); the port."""
    port = free_port()
    cmd = ["serve", "--checkpoint", str(work / "classifier"), "--port", str(port)]
    procs.start("classifier_server", [RLINF, *cmd, "--torch-threads", "1"])
    wait_for(lambda: port_open(port), 120, "the served classifier", procs)
    return port


NEGATIVES: dict = {}  # the noisy teleop's episodes of this run (results)


def learned_reward(work: Path, procs: Procs, backbone: list[str]) -> tuple[dict | None, int | None]:
    """The task's success classifier trained and served: (its metrics, its port); none for a
    task whose reward is the twin's judge."""
    if TASK.classifier is None:
        return None, None
    if TASK.negatives:
        rollouts = collect_demos(work, TASK.negatives, procs, "rollouts", TASK.negative_noise)
        print(f"noisy teleop (the classifier's negatives): {rollouts}", flush=True)
        NEGATIVES.update(rollouts, noise=TASK.negative_noise)
    t0 = time.time()
    metrics = train_classifier(work, backbone)
    metrics["train_s"] = round(time.time() - t0, 1)
    print(f"classifier: {metrics}", flush=True)
    return metrics, serve_classifier(work, procs)


# the learned reward's figures from the learner's metrics: the classifier against the twin's
# judge (newest window and totals) and the share of streamed transitions that reached a gradient
RUN_FIGURES = (
    "reward_judge/fp_rate",
    "reward_judge/fn_rate",
    "reward_judge/total_fp_rate",
    "reward_judge/total_fn_rate",
    "reward_judge/windows",
    "learner/transitions_trained_share",
    "ingest/intervention_ratio",
    "reward_judge/operator_rejected",
    "reward_judge/operator_confirmed",
    "reward_judge/operator_caught",
)


def newest(metrics: dict, keys: tuple[str, ...]) -> dict:
    """The newest value of each key the run logged: ``final`` first, else the last history entry
    holding it (a window's rate is logged only when a window closed)."""
    out = {}
    for k in keys:
        vals = [h[k] for h in metrics.get("history", []) if h.get(k) is not None]
        v = metrics.get("final", {}).get(k, vals[-1] if vals else None)
        if v is not None:
            out[k] = round(float(v), 4)
    return out


def port_open(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def online(
    work: Path,
    minutes: float,
    checkpoint_every: int,
    procs: Procs,
    overrides: list[str],
    reward_port: int | None,
    robots: int = 1,
) -> tuple[float, dict]:
    """Learner + server + ``robots`` twin graphs until the learner's budget ends; returns (robot
    start, final). Each robot's nodes run in a ROS domain of their own (the graphs use the same
    topic names, as two robot PCs would) and share the one ingest and the one policy server."""
    ingest_port, server_port = free_port(), free_port()
    out = work / "run"
    args = learner_args(
        out,
        work / "demos",
        ingest_port,
        server_port,
        f"train.time_budget_s={minutes * 60 + 60}",
        "train.final_eval=false",
        f"train.checkpoint_every={checkpoint_every}",
        *overrides,
        *[f"algorithm.bc_weight={BC_WEIGHT}"] * bool(BC_WEIGHT),
    )
    args[2] = str(ROOT / TASK.learner)
    procs.start("learner", args)
    start_server(procs, out, server_port)
    graphs = [task_graph(work, server_port, ingest_port, reward_port, i) for i in range(robots)]
    domain = int(os.environ["ROS_DOMAIN_ID"])
    t_robot = time.time()
    for i, graph in enumerate(graphs):
        env = {"ROS_DOMAIN_ID": str(domain + i)}
        for kind in TASK.nodes + ("teleop",) * (HUMAN_PATIENCE_S is not None):
            procs.start_node(kind, graph, name=kind if i == 0 else f"{kind}_twin{i}", env=env)
    retrainer = None
    if CORRECTIONS_MIN is not None and reward_port is not None:
        stores = tuple(corrections_store(work, i) for i in range(robots))
        retrainer = Retrainer(
            stores,
            CORRECTIONS_MIN * 60,
            lambda r: train_classifier(work, overrides, f"classifier_r{r}", reward_port, stores),
            t_robot,
        )
        retrainer.start()
    try:
        wait_for(
            lambda: procs.procs["learner"].poll() is not None,
            minutes * 60 + 600,
            "the learner's budget",
            procs,
        )
    finally:
        if retrainer is not None:
            retrainer.stop()
            CORRECTIONS.update(
                every_min=CORRECTIONS_MIN,
                rounds=retrainer.rounds,
                errors=retrainer.errors,
                catch_missed=CATCH_FRAMES,
                on_reject=ON_REJECT,
                **CONFIRMED_LATCH,
            )
    if procs.procs["learner"].returncode != 0:
        raise SystemExit(f"learner exited {procs.procs['learner'].returncode}\n{procs.logs()}")
    return t_robot, json.loads((out / "metrics.json").read_text())


def rel(path: str) -> str:
    """``path`` relative to the repository when it lies inside it (results name no home)."""
    p = Path(path)
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else path


def reevaluate(stem: str, work: Path, episodes: int, sampled: bool) -> None:
    """Evaluate a finished run's checkpoints again (at their recorded wall times), re-render."""
    data = load(stem)
    meta, walls = data["meta"], {r["checkpoint"]: r["wall_s"] for r in data["rows"]}
    overrides = [f"model.encoder.weights={meta['encoder_weights']}"] * bool(
        meta.get("encoder_weights")
    )
    ckpts = [(w, p) for w, p in checkpoints(work, 0.0) if p.name in walls]
    rows = heldout(
        TASK.learner, [(walls[p.name], p) for _, p in ckpts], episodes, overrides, sampled
    )
    judge(meta, rows, sampled)
    run_metrics = work / "run" / "metrics.json"
    history = (
        json.loads(run_metrics.read_text()).get("history", []) if run_metrics.is_file() else []
    )
    png, robots = RESULTS / f"{stem}.png", int(meta.get("robots", 1))
    plot(
        rows,
        history,
        png,
        meta["target"],
        meta["task"],
        TASK.reward_source,
        meta.get("single"),
        robots,
    )
    print(render(stem, meta, rows))


def robots_stored(store: Path) -> dict[str, int]:
    """Transitions the ingest stored per robot id (the run's episode store)."""
    from rlinf_data.store import EpisodeStore

    counts: dict[str, int] = {}
    if not store.is_dir():
        return counts
    eps = EpisodeStore(store, mode="r")
    for i in range(len(eps)):
        robot = str(eps.info(i).extra.get("robot_id", "?"))
        counts[robot] = counts.get(robot, 0) + eps.length(i)
    return counts


def single_robot(robots: int) -> dict | None:
    """The single-robot run of the same task (its results file), for a fleet's comparison."""
    if robots <= 1 or not (RESULTS / f"{TASK.stem}.json").is_file():
        return None
    data = load(TASK.stem)
    m = data["meta"]
    return {
        "stem": TASK.stem,
        "date": m.get("date", "?"),
        "load": f"{m.get('load_1min_start', 0):.1f}-{m.get('load_1min_end', 0):.1f}",
        "minutes": m["minutes"],
        "rows": data["rows"],
    }


def main() -> None:
    global TASK, HUMAN_PATIENCE_S, CORRECTIONS_MIN, CATCH_FRAMES, ON_REJECT, BC_WEIGHT
    ap = argparse.ArgumentParser()
    ap.add_argument("--task", choices=sorted(TASKS), default="reach")
    ap.add_argument("--demos", type=int, default=20)
    ap.add_argument(
        "--minutes", type=float, default=20.0, help="online learning time (learner budget)"
    )
    ap.add_argument(
        "--checkpoint-every", type=int, default=1000, help="transitions between checkpoints"
    )
    ap.add_argument("--eval-episodes", type=int, default=50)
    ap.add_argument("--target", type=float, default=0.8)
    ap.add_argument(
        "--robots",
        type=int,
        default=1,
        help="twin robots feeding the one learner (a fleet; results <stem>_robots<N>)",
    )
    ap.add_argument(
        "--human",
        type=float,
        default=None,
        metavar="PATIENCE_S",
        help="a scripted human watches the online run and takes over when the task has not "
        "progressed for PATIENCE_S seconds (HIL-SERL's interventions; results <stem>_human)",
    )
    add_operator_arguments(ap)
    ap.add_argument(
        "--bc-weight", type=float, default=0.0, help="algorithm.bc_weight (results <stem>_bc<W>)"
    )
    ap.add_argument("--work", default=None, help="default runs/bench_<stem>")
    ap.add_argument("--keep-demos", action="store_true", help="reuse <work>/demos when it exists")
    ap.add_argument(
        "--sampled",
        action="store_true",
        help="also evaluate the sampled policy (the one the twin ran: server.deterministic=false)",
    )
    ap.add_argument(
        "--from-json", action="store_true", help="only re-render results/<stem>.md from its JSON"
    )
    ap.add_argument(
        "--reevaluate",
        action="store_true",
        help="evaluate the finished run in --work again (e.g. with --sampled) and re-render",
    )
    a = ap.parse_args()
    TASK = TASKS[a.task]
    if a.robots < 1:
        ap.error(f"--robots must be >= 1, got {a.robots}")
    if a.human is not None and a.human <= 0:
        ap.error(f"--human takes the human's patience in seconds (> 0), got {a.human}")
    check_operator_arguments(ap, a, TASK.classifier)
    if a.bc_weight < 0:
        ap.error(f"--bc-weight must be >= 0, got {a.bc_weight}")
    HUMAN_PATIENCE_S, CORRECTIONS_MIN, CATCH_FRAMES = a.human, a.corrections, a.catch
    ON_REJECT, BC_WEIGHT = a.on_reject, a.bc_weight
    stem = TASK.stem if a.robots == 1 else f"{TASK.stem}_robots{a.robots}"
    stem += "_human" if a.human is not None else ""
    stem += operator_stem(a) + (f"_bc{a.bc_weight:g}" if a.bc_weight else "")
    if a.from_json:
        data = load(stem)
        print(render(stem, data["meta"], data["rows"]))
        return
    a.work = a.work or f"runs/bench_{stem}"
    if a.reevaluate:
        reevaluate(stem, (ROOT / a.work).resolve(), a.eval_episodes, a.sampled)
        return
    os.environ["ROS_DOMAIN_ID"] = str(free_domains(a.robots)[0])  # apart from others
    os.environ["RMW_IMPLEMENTATION"] = "rmw_fastrtps_cpp"
    os.environ.update(TOKENS)
    work = (ROOT / a.work).resolve()
    demos_kept = a.keep_demos and (work / "demos").is_dir()
    for child in work.iterdir() if work.is_dir() else []:
        if not (demos_kept and child.name in ("demos", "collect.log", "demo_episodes.json")):
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    work.mkdir(parents=True, exist_ok=True)
    load0 = os.getloadavg()[0]
    procs = Procs(work)
    try:
        demo = {"reused": True} if demos_kept else collect_demos(work, a.demos, procs)
        print(f"demos: {demo}", flush=True)
        overrides = encoder_weights(work)
        classifier, reward_port = learned_reward(work, procs, overrides)
        t_robot, metrics = online(
            work, a.minutes, a.checkpoint_every, procs, overrides, reward_port, a.robots
        )
    finally:
        procs.stop_all()
    load1 = os.getloadavg()[0]
    rows = heldout(TASK.learner, checkpoints(work, t_robot), a.eval_episodes, overrides, a.sampled)
    final = metrics["final"]
    RESULTS.mkdir(parents=True, exist_ok=True)
    single = single_robot(a.robots)
    png = RESULTS / f"{stem}.png"
    plot(rows, metrics["history"], png, a.target, a.task, TASK.reward_source, single, a.robots)
    meta = machine_meta(
        task=a.task,
        robots=a.robots,
        robots_stored=robots_stored(work / "run" / "episodes"),
        single=single,
        demo_episodes=a.demos,
        graph=TASK.graph,
        learner=TASK.learner,
        demos=demo,
        minutes=a.minutes,
        eval_episodes=a.eval_episodes,
        target=a.target,
        load_1min_start=round(load0, 2),
        load_1min_end=round(load1, 2),
        transitions=final.get("env_steps"),
        updates=final.get("updates"),
        pushes=final.get("push/pushes"),
        push_failures=final.get("push/failures"),
        ingest_duplicates=final.get("ingest/duplicates"),
        ingest_gaps=final.get("ingest/gaps"),
        twin_success_last100=final.get("success_rate"),
        sim_task=sim_task(TASK.learner),
        classifier=classifier,
        classifier_config=TASK.classifier,
        negatives=NEGATIVES or None,
        encoder_weights=rel(overrides[0].split("=", 1)[1]) if overrides else None,
        run_figures=newest(metrics, RUN_FIGURES),
        human_patience_s=a.human,
        bc_weight=a.bc_weight or None,
        corrections=CORRECTIONS or None,
    )
    judge(meta, rows, a.sampled)
    print(f"run figures: {meta['run_figures']}", flush=True)
    verdict = render(stem, meta, rows)
    print(verdict)
    print((RESULTS / f"{stem}.md").read_text())


if __name__ == "__main__":
    main()
