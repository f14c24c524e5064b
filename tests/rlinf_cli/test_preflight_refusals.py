"""Mistakes of the online-RL runbook refused before anything loads, each naming the key and fix.

A busy listen port (``rlinf train`` with an ingest, ``rlinf serve``), a ``train.out_dir`` that
already holds a run (``train.resume=true`` / ``--new-run``), a graph whose streamer has no token,
``rlinf eval`` of an online run (no tokens, no video unless asked) and the learner's serve hint.
"""

from __future__ import annotations

import json
import logging
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlinf_cli.main import main

ROOT = Path(__file__).resolve().parents[2]
REACH = str(ROOT / "configs/sim_franka_reach_ppo.yaml")
ONLINE = str(ROOT / "configs/ros_online_rlpd.yaml")
TOKEN = "t" * 40
TOKEN_VARS = (
    "RLINF_INGEST_TOKEN",
    "RLINF_INGEST_TOKEN_FILE",
    "RLINF_WEIGHTS_TOKEN",
    "RLINF_WEIGHTS_TOKEN_FILE",
)


class Started(BaseException):
    """Raised where a run would start loading; a BaseException, so nothing swallows it."""


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.fixture
def no_tokens(monkeypatch) -> None:
    for name in TOKEN_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def tokens(monkeypatch) -> None:
    monkeypatch.setenv("RLINF_INGEST_TOKEN", TOKEN)
    monkeypatch.setenv("RLINF_WEIGHTS_TOKEN", TOKEN)


@pytest.fixture
def starts(monkeypatch) -> list:
    """The run's start (cluster, then runner) recorded and stopped: what got that far."""
    seen: list = []

    def start(spec, cfg):
        seen.append(cfg)
        raise Started

    monkeypatch.setattr("rlinf_cli.train.open_cluster", start)
    return seen


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


# ---- busy ports --------------------------------------------------------------------------------
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_train_refuses_a_busy_ingest_port_before_starting(
    dry_run, busy_port, tokens, starts, tmp_path, capsys
):
    argv = ["train", ONLINE, f"ingest.port={busy_port}", f"train.out_dir={tmp_path / 'run'}"]
    assert main([*argv, *(["--dry-run"] if dry_run else [])]) == 2
    err = _one_line(capsys)
    assert f"key 'ingest.port': port {busy_port}" in err and "already in use" in err, err
    assert f"ingest.port={busy_port + 1}" in err and "streamer.stream.url" in err, err
    assert starts == []


def test_train_with_a_free_ingest_port_gets_to_the_start(tokens, starts, tmp_path):
    with socket.socket() as s:  # a port nobody listens on once this closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(Started):
        main(["train", ONLINE, f"ingest.port={port}", f"train.out_dir={tmp_path / 'run'}"])
    assert starts[0].ingest.port == port


def test_serve_refuses_a_busy_port_before_loading_the_checkpoint(busy_port, monkeypatch, capsys):
    loaded: list = []
    monkeypatch.setattr("rlinf_cli.serve.load_served_policy", lambda cfg: loaded.append(cfg))
    assert main(["serve", "--checkpoint", "/nonexistent/run", "--port", str(busy_port)]) == 2
    err = _one_line(capsys)
    assert f"key 'server.port': port {busy_port}" in err and f"--port {busy_port + 1}" in err
    assert loaded == []


def test_port_zero_is_always_free():
    from rlinf_cli.preflight import ListenPort, check_listen_port

    check_listen_port(ListenPort("ingest.port", "127.0.0.1", 0, "-"))


# ---- out_dir -----------------------------------------------------------------------------------
def _previous_run(path: Path, resumable: bool = False) -> Path:
    """A run directory as a finished run leaves it (with a checkpoint to resume, if asked)."""
    (path / "checkpoints" / "iter_000002").mkdir(parents=True)
    (path / "metrics.json").write_text("{}")
    if resumable:
        (path / "checkpoints" / "iter_000002" / "meta.json").write_text("{}")
    return path


def test_a_non_empty_out_dir_is_refused_with_resume_and_new_run(starts, tmp_path, capsys):
    out = _previous_run(tmp_path / "run")
    assert main(["train", REACH, f"train.out_dir={out}"]) == 2
    err = _one_line(capsys)
    assert f"key 'train.out_dir': {out} already holds a run" in err, err
    assert "train.resume=true" in err and "--new-run" in err, err
    assert starts == []


def test_new_run_writes_beside_the_old_one(starts, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    out = _previous_run(tmp_path / "run")
    with pytest.raises(Started):
        main(["train", REACH, f"train.out_dir={out}", "--new-run"])
    fresh = starts[0].train.out_dir
    assert re.fullmatch(re.escape(str(out)) + r"-\d{8}-\d{6}", fresh), fresh
    assert not Path(fresh).exists()  # the runner creates it; the checks write nothing
    assert f"writing this run to {fresh}" in caplog.text


def test_new_run_never_reuses_an_existing_directory(tmp_path):
    from rlinf_cli.train import new_run_dir

    first = new_run_dir(str(tmp_path / "run"), now=0.0)
    Path(first).mkdir()
    assert new_run_dir(str(tmp_path / "run"), now=0.0) == f"{first}-2"


def test_resume_true_resumes_the_out_dir(starts, tmp_path):
    out = _previous_run(tmp_path / "run", resumable=True)
    with pytest.raises(Started):
        main(["train", REACH, f"train.out_dir={out}", "train.resume=true"])
    assert starts[0].train.resume == starts[0].train.out_dir == str(out)


def test_resume_true_without_a_checkpoint_names_the_out_dir(starts, tmp_path, capsys):
    out = _previous_run(tmp_path / "run")  # no complete checkpoint to resume
    assert main(["train", REACH, f"train.out_dir={out}", "train.resume=true"]) == 2
    err = _one_line(capsys)
    assert "key 'train.resume'" in err and str(out) in err, err


def test_new_run_and_resume_exclude_each_other(starts, tmp_path, capsys):
    out = _previous_run(tmp_path / "run", resumable=True)
    assert main(["train", REACH, f"train.out_dir={out}", "train.resume=true", "--new-run"]) == 2
    assert "give only one" in _one_line(capsys)


def test_dry_run_refuses_a_non_empty_out_dir_as_the_run_does(starts, tmp_path, capsys):
    out = _previous_run(tmp_path / "run")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(["train", REACH, f"train.out_dir={out}"]) == 2
    refused = _one_line(capsys)
    assert main(["train", REACH, f"train.out_dir={out}", "--dry-run"]) == 2
    assert _one_line(capsys) == refused  # the same message, with the same fixes
    assert "train.resume=true" in refused and "--new-run" in refused, refused
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert starts == []


def test_dry_run_of_a_new_run_passes_and_writes_nothing(starts, tmp_path, capsys):
    out = _previous_run(tmp_path / "run")
    assert main(["train", REACH, f"train.out_dir={out}", "--new-run", "--dry-run"]) == 0
    fresh = json.loads(capsys.readouterr().out)["train"]["out_dir"]
    assert fresh.startswith(f"{out}-") and not Path(fresh).exists()
    assert starts == []


def test_a_seed_log_written_by_the_launcher_is_not_a_previous_run(starts, tmp_path):
    out = tmp_path / "seed_0"
    out.mkdir()
    (out / "train.log").write_text("")  # rlinf train --seeds opens it before the seed starts
    with pytest.raises(Started):
        main(["train", REACH, f"train.out_dir={out}"])


def test_a_runner_without_resume_is_offered_only_a_new_run(tmp_path):
    from types import SimpleNamespace

    from rlinf_cli.errors import PreflightError
    from rlinf_cli.preflight import check_out_dir

    out = _previous_run(tmp_path / "run")
    with pytest.raises(PreflightError, match="--new-run") as e:
        check_out_dir(SimpleNamespace(out_dir=str(out)))
    assert "train.resume" not in str(e.value)


# ---- tokens ------------------------------------------------------------------------------------
def test_a_streamer_without_token_names_the_variable_and_the_keys(no_tokens):
    from rlinf_ros.streaming import StreamerConfig

    with pytest.raises(ValueError) as e:
        StreamerConfig().resolve_token()
    text = str(e.value)
    assert "'streamer.stream.token'" in text and "RLINF_INGEST_TOKEN" in text, text
    assert "'streamer.token_file'" in text, text


def test_ros_up_refuses_a_streamer_without_token_before_any_node(no_tokens, monkeypatch, capsys):
    started: list = []
    monkeypatch.setattr("rlinf_ros.graph.up", lambda *a, **k: started.append(a) or 0)
    argv = ["ros", "up", str(ROOT / "configs/ros_sim_franka.yaml"), "streamer.enabled=true"]
    assert main(argv) == 2
    err = _one_line(capsys)
    assert "'streamer.token_file'" in err and "RLINF_INGEST_TOKEN" in err, err
    assert started == []


# ---- rlinf eval of an online run ---------------------------------------------------------------
@pytest.fixture
def online_checkpoint(tmp_path, tokens) -> Path:
    """A checkpoint directory as an online run writes it (its config has ingest + push on)."""
    from learner.checkpoint import FORMAT, MODEL_FILE
    from rlinf_cli.train import build
    from rlinf_contracts.config import to_dict

    _, cfg = build(ONLINE, [f"train.out_dir={tmp_path / 'run'}"])
    assert cfg.ingest.enabled and cfg.push.url
    ckpt = tmp_path / "run" / "checkpoints" / "iter_000001"
    ckpt.mkdir(parents=True)
    (ckpt / MODEL_FILE).write_bytes(b"")
    meta = {"format": FORMAT, "runner": "offpolicy", "iteration": 1, "config": to_dict(cfg)}
    (ckpt / "meta.json").write_text(json.dumps(meta))
    return ckpt


@pytest.fixture
def evaluated(monkeypatch) -> list:
    """The checkpoint's loading and episodes replaced: what reached the evaluation (cfg, video)."""
    seen: list = []

    def load_policy(path):
        meta = json.loads((Path(path) / "meta.json").read_text())
        return object(), {**meta, "path": str(path)}

    def evaluate_config(policy, cfg, episodes, seed, splits=None, video=None, **kw):
        seen.append((cfg, video))
        return {"id": {"success_rate": 1.0, "episodes": episodes}}

    monkeypatch.setattr("learner.eval.embodied.load_policy", load_policy)
    monkeypatch.setattr("learner.eval.embodied.evaluate_config", evaluate_config)
    return seen


def test_eval_of_an_online_run_needs_no_tokens_and_renders_no_video(
    online_checkpoint, evaluated, monkeypatch, tmp_path, capsys
):
    for name in TOKEN_VARS:
        monkeypatch.delenv(name, raising=False)
    assert main(["eval", str(online_checkpoint), "--episodes", "2", "--out", str(tmp_path)]) == 0
    cfg, video = evaluated[0]
    assert not cfg.ingest.enabled and cfg.push.url == "" and video is None
    assert json.loads(capsys.readouterr().out)["success_rate"] == {"id": 1.0}


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--video"], "{out}/eval.mp4"),
        (["--video", "{out}/clip.mp4"], "{out}/clip.mp4"),
        (["--video", "eval.num_envs=2"], "{out}/eval.mp4"),  # an override, not a path
        (["--video", "--no-video"], None),
    ],
)
def test_eval_renders_a_video_only_when_asked(
    flags, expected, online_checkpoint, evaluated, tmp_path, capsys
):
    out = tmp_path / "o"
    flags = [f.format(out=out) for f in flags]
    assert main(["eval", str(online_checkpoint), *flags, "--out", str(out)]) == 0
    cfg, video = evaluated[0]
    assert video == (expected.format(out=out) if expected else None)
    if "eval.num_envs=2" in flags:
        assert cfg.eval.num_envs == 2


# ---- the learner's serve hint ------------------------------------------------------------------
def test_the_learners_serve_hint_samples_actions_as_the_runbook_says():
    """The hint the learner logs and the runbook's command serve the initial actor the same way:
    sampled actions (``server.deterministic=false``), so the robot explores."""
    source = (ROOT / "learner/offpolicy/remote.py").read_text()
    hint = re.search(r"serve it with \"\s*\"'(rlinf serve [^']*)'", source)
    assert hint is not None, "the learner's 'serve it with ...' hint moved"
    assert "server.deterministic=false" in hint.group(1)
    runbook = (ROOT / "docs/robot_online_rl.md").read_text()
    assert "/initial server.deterministic=false" in runbook


# ---- rlinf online: the dry run refuses what the real run refuses ---------------------------------
GRAPH = str(ROOT / "configs/ros_sim_franka_push.yaml")
PUSH = str(ROOT / "configs/ros_online_rlpd_push.yaml")


@pytest.fixture
def online(tmp_path, monkeypatch, no_tokens) -> list:
    """``rlinf online`` of the push twin into ``tmp_path``: the children's start recorded and
    stopped; tokens made (by a real run) in ``tmp_path/secrets``."""
    monkeypatch.setenv("RLINF_SECRETS_DIR", str(tmp_path / "secrets"))
    started: list = []
    monkeypatch.setattr("rlinf_cli.online.execute", lambda plan, env, say: started.append(plan))
    return started


def _online(tmp_path: Path, *extra: str) -> list[str]:
    return [
        "online", GRAPH, PUSH, "--teleop", "scripted",
        f"learner:train.out_dir={tmp_path / 'run'}", f"learner:train.demos={tmp_path / 'demos'}",
        *extra,
    ]  # fmt: skip


def _tree(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*"))


REFUSALS = {
    "out_dir": ([], "key 'train.out_dir'", "--new-run"),
    "ingest port": (["--ingest-port", "{busy}"], "key 'ingest.port': port {busy}", "--ingest-port"),
    "server port": (["--server-port", "{busy}"], "key 'push.url': port {busy}", "--server-port"),
    "token file": ([], "token RLINF_WEIGHTS_TOKEN: cannot read", "unset RLINF_WEIGHTS_TOKEN_FILE"),
    "short token": ([], "token RLINF_INGEST_TOKEN ($RLINF_INGEST_TOKEN) is too short", "longer"),
    "bench demos": (["--role", "learner", "--peer", "robot-pc"], "key 'train.demos'", "rsync"),
    # a key the child would refuse minutes later (after the demos): refused by its stage's loader
    "learner key": (
        ["learner:train.time_budget=300"],
        "learner: unknown key 'train.time_budget'",
        "Did you mean 'train.time_budget_s'?",
    ),
    "collect key": (
        ["collect:teleop.devce=x"],
        "collect: unknown key 'teleop.devce'",
        "teleop.device",
    ),
    "server key": (["server:server.max_bach=8"], "server: unknown key", "'server.max_batch'"),
    "server value": (["server:server.max_batch=0"], "server: key 'server.max_batch'", ">= 1"),
    # demos already there (no collect stage): the device is still checked
    "teleop device": (["--teleop", "scriptd"], "--teleop 'scriptd'", "did you mean 'scripted'"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_online_dry_run_refuses_what_the_run_refuses(
    case, online, busy_port, tmp_path, monkeypatch, capsys
):
    extra, message, fix = (
        [w.format(busy=busy_port) for w in REFUSALS[case][0]],
        *(s.format(busy=busy_port) for s in REFUSALS[case][1:]),
    )
    if case == "out_dir":
        _previous_run(tmp_path / "run")
    if case == "token file":
        monkeypatch.setenv("RLINF_WEIGHTS_TOKEN_FILE", str(tmp_path / "missing_token"))
    if case == "short token":
        monkeypatch.setenv("RLINF_INGEST_TOKEN", "short")
    if case == "teleop device":
        monkeypatch.setattr("rlinf_cli.online.count_successes", lambda store: 20)
    before = _tree(tmp_path)
    assert main([*_online(tmp_path, *extra), "--dry-run"]) == 2
    dry = _one_line(capsys)
    assert message in dry and fix in dry, dry
    assert _tree(tmp_path) == before  # the dry run wrote nothing
    assert main(_online(tmp_path, *extra)) == 2
    assert _one_line(capsys) == dry  # the real run: the same refusal, before any child
    assert online == []
    if "token" not in case:  # refused before the real run makes its token files
        assert _tree(tmp_path) == before


def test_online_dry_run_prints_the_commands_and_writes_nothing(online, tmp_path, capsys):
    assert main([*_online(tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would create" in out and "dry run: every check passed" in out, out
    for stage in ("collect", "learner", "server", "graph"):
        assert f"] {stage} (" in out, out
    assert _tree(tmp_path) == [] and online == []  # no token file, no run directory, no child
    main(_online(tmp_path))
    assert len(online) == 1  # the real run, the same checks passed, gets to its children
    made = sorted(p.name for p in (tmp_path / "secrets").iterdir())
    assert made == ["ingest_token", "weights_token"]


TYPOS = {"graph": (GRAPH, "ros_sim_franka_psh.yaml"), "learner": (PUSH, "ros_online_rlpd_pus.yaml")}


@pytest.mark.parametrize("stage", list(TYPOS))
def test_online_names_the_config_file_meant(stage, online, tmp_path, capsys):
    """A config path one slip away from a file beside it: refused naming that file, by the dry
    run and the real run alike, before anything is made."""
    meant, typo = TYPOS[stage]
    words = [str(ROOT / "configs" / typo) if w == meant else w for w in _online(tmp_path)]
    for dry in (["--dry-run"], []):
        assert main([*words, *dry]) == 2
        err = _one_line(capsys)
        assert f"{stage}: config file not found" in err and f"did you mean {meant}?" in err, err
    assert _tree(tmp_path) == [] and online == []
