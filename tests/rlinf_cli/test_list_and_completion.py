"""rlinf --version, rlinf list KIND from the registries, rlinf completion bash."""

import subprocess
import sys

import pytest

from rlinf_cli.main import main


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("rlinf ")


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("envs", ["mujoco_franka", "toy", "maniskill", "ros"]),
        (
            "tasks",
            ["mujoco_franka/reach", "mujoco_franka/push", "mujoco_franka/lift", "toy/point_reach"],
        ),
        ("models", ["mlp", "cnn"]),
        ("algorithms", ["algorithm.adv: gae", "algorithm.adv: grpo", "sac", "rlpd"]),
        ("runners", ["embodied", "reasoning"]),
        ("rewards", ["exact_match", "math"]),
    ],
)
def test_list_reads_the_registries(kind, expected, capsys):
    assert main(["list", kind]) == 0
    names = [line.split("  ")[0].strip() for line in capsys.readouterr().out.splitlines()]
    for name in expected:
        assert name in names


def test_bash_completion_completes_subcommands_and_flags(tmp_path):
    script = tmp_path / "c.sh"
    out = subprocess.run(
        [sys.executable, "-m", "rlinf_cli.main", "completion", "bash"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    script.write_text(out.stdout)
    probe = (
        f'source {script}; COMP_WORDS=(rlinf li); COMP_CWORD=1; _rlinf; echo "${{COMPREPLY[@]}}"; '
        'COMP_WORDS=(rlinf train --dr); COMP_CWORD=2; _rlinf; echo "${COMPREPLY[@]}"; '
        'COMP_WORDS=(rlinf list mo); COMP_CWORD=2; _rlinf; echo "${COMPREPLY[@]}"'
    )
    lines = subprocess.run(
        ["bash", "-c", probe], capture_output=True, text=True, timeout=30
    ).stdout.splitlines()
    assert lines == ["list", "--dry-run", "models"]


def test_no_opengl_info_line():
    out = subprocess.run(
        [sys.executable, "-m", "rlinf_cli.main", "list", "tasks"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and "OpenGL_accelerate" not in out.stderr
