"""Common CLI mistakes: each ends before any cluster starts, as one or two lines naming the key,
exit code 2, no traceback."""

import os

import pytest

from rlinf_cli.main import main

C = "configs/sim_franka_reach_ppo.yaml"
LLM = "configs/llm_grpo_arith.yaml"
# a local cluster has one slot per core this process may run on: the first slot past it
SLOTS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)

CASES = [
    (
        ["train", C, "placement.env,rollout,actor=0-999", "--dry-run"],
        "key 'placement'",
        f"slot {SLOTS} out of range",
    ),
    (
        ["train", C, "placement.env,rollout,actor=a:b:c", "--dry-run"],
        "key 'placement'",
        "cannot parse 'a'",
    ),
    (["train", C, "placement.env,rollout,actor=0-999"], "key 'placement'", "this machine has"),
    (
        ["train", C, "env.name=mujoco_franka/pushh", "--dry-run"],
        "key 'env.name'",
        "Did you mean 'mujoco_franka/push'",
    ),
    (["train", C, "env.name=mujoco_frank/reach"], "key 'env.name'", "Did you mean 'mujoco_franka'"),
    (["train", C, "model.name=transformer", "--dry-run"], "key 'model.name'", "Known: cnn, mlp"),
    (["train", C, "train.resume=/nonexistent/run"], "key 'train.resume'", "no checkpoint at"),
    (["train", C, "algorithm.adv=grop", "--dry-run"], "algorithm.adv", "grpo"),
    (["train", C, "runner=embodid", "--dry-run"], "key 'runner'", "did you mean 'embodied'"),
    (["train", C, "placement=null", "--dry-run"], "key 'placement'", "cannot be null"),
    (["train", C, "--dry-run", "placement.evn=0"], "key 'placement'", "'evn'"),
    (["train", C, "train.time_budget_s=0", "--dry-run"], "key 'train.time_budget_s'", "> 0"),
    (["train", C, "--ray-address", "auto"], "--ray-address auto", "ray start --head"),
    (
        ["train", C, "--ray-address", "127.0.0.1:9"],
        "--ray-address 127.0.0.1:9",
        "nothing is listening",
    ),
    (["eval", "--policy-server", "ws://127.0.0.1:9", C], "--policy-server", "nothing is listening"),
    (["eval", "--policy-server", "http://", C], "--policy-server", "expected ws://HOST:PORT"),
    (
        ["ros", "up", "configs/ros_sim_franka.yaml", "policy_client.server_url=http://x"],
        "policy_client.server_url",
        "expected ws://",
    ),
    (["config", "foo"], "key 'runner'", "Known: embodied, encoder_pretrain, offline, offpolicy"),
    (["eval", "/nonexistent/run"], "no checkpoint at", "checkpoints/"),
    (
        [
            "train",
            "configs/llm_ppo_arith.yaml",
            "train.driver=workers",
            "placement={'rollout,reward': '0', 'actor': '0-1'}",
        ],
        "key 'placement'",
        "the critic trains in one actor process",
    ),
    (["train", LLM, "actor.strategy=fsdb", "--dry-run"], "'actor.strategy'", "['ddp', 'fsdp']"),
    (
        ["train", LLM, "actor.strategy=fsdp", "model.lora_rank=4"],
        "'actor.strategy'='fsdp'",
        "use actor.strategy=ddp",
    ),
    (["train", LLM, "train.resume=/nonexistent/run"], "key 'train.resume'", "no checkpoint at"),
]


class ClusterStarted(BaseException):
    """Raised by the guarded start points; a BaseException, so no ``except Exception`` hides it."""


@pytest.fixture(autouse=True)
def _no_local_cluster(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr("learner.cluster.RAY_CURRENT_CLUSTER", tmp_path / "none")


@pytest.fixture
def cluster_starts(monkeypatch) -> list[str]:
    """Every way a run gets its cluster, refused and recorded. Asking ``ray.is_initialized()`` would
    not do: the test run's shared Ray instance may be up, and ``Cluster.local`` then reuses it."""
    import ray

    from learner.cluster import Cluster

    started: list[str] = []

    def refuse(what: str):
        def start(*args, **kwargs):
            started.append(what)
            raise ClusterStarted(what)

        return start

    monkeypatch.setattr(Cluster, "local", classmethod(refuse("Cluster.local")))
    monkeypatch.setattr(Cluster, "connect", classmethod(refuse("Cluster.connect")))
    monkeypatch.setattr(ray, "init", refuse("ray.init"))
    monkeypatch.setattr(
        "rlinf_cli.train.open_cluster", refuse("open_cluster")
    )  # the in-process run too
    return started


@pytest.mark.parametrize("argv, key, fix", CASES, ids=[" ".join(c[0][2:] or c[0]) for c in CASES])
def test_mistake_is_one_or_two_lines_naming_the_key(argv, key, fix, capsys, cluster_starts):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    lines = err.splitlines()
    assert 1 <= len(lines) <= 2, err
    assert key in err and fix in err, err
    assert cluster_starts == []  # caught before any cluster started


def test_a_well_formed_train_reaches_the_guarded_cluster_start(cluster_starts, tmp_path):
    """The guard above sits on the real start path: without a mistake, train gets that far (into
    a fresh out_dir: the config's own may hold an earlier run, which is refused)."""
    with pytest.raises(ClusterStarted):
        main(["train", C, f"train.out_dir={tmp_path / 'run'}"])
    assert cluster_starts == ["open_cluster"]


def test_flags_may_come_before_overrides(capsys, tmp_path):
    import json

    # out_dir of its own: a dry run refuses the default runs/<name> once a run has written there
    out = f"train.out_dir={tmp_path}"
    assert main(["train", C, "--dry-run", "actor.lr=1e-3", "placement.env=0", out]) == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["actor"]["lr"] == 1e-3
    assert cfg["placement"] == {"rollout,actor": "0", "env": 0}


def test_unknown_flags_are_still_errors(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", C, "--dry-runn"])
    assert e.value.code == 2
    assert "unrecognized arguments: --dry-runn" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, hint",
    [
        # no prefix matching: `--seed 3` must not run three seeds as `--seeds 3` would
        (["train", C, "--seed", "3"], "did you mean the flag --seeds or the override seed=VALUE?"),
        (["train", C, "--sedes", "3"], "did you mean the flag --seeds?"),
    ],
)
def test_an_unknown_flag_gets_the_close_flag_or_override(argv, hint, capsys, cluster_starts):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and cluster_starts == []
    err = capsys.readouterr().err
    assert hint in err and "Traceback" not in err, err


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["evl", "runs/x"], "did you mean 'eval'?"),
        (["-v", "trian", C], "did you mean 'train'?"),
        (["zzz"], "unknown command 'zzz' (commands: train, eval,"),
    ],
)
def test_a_mistyped_command_gets_a_guess(argv, hint, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert hint in err and "Traceback" not in err, err
