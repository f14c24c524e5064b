#!/usr/bin/env bash
# Install franky-sim (a Franka robot simulator speaking libfranka's network protocol, MuJoCo
# inside) into a venv of its own, .venv-franky-sim, for the libfranka backend's end-to-end tests
# (tests/robot_drivers/test_libfranka_franky_sim.py) and for trying a real-robot config on a
# desk: `.venv-franky-sim/bin/franky-sim -s mujoco` is then "the robot" at 127.0.0.1.
#
# Why a venv of its own: franky-sim 1.0.4 pins mujoco 4.x (and Pinocchio), the project pins
# mujoco 3.3.7 (`sim` extra). It runs as a separate process, like a robot, so nothing of it is
# imported by the project.
#
# Usage: scripts/install_franky_sim.sh [PATH/TO/VENV]   (default: .venv-franky-sim in the repo)
# Idempotent: a stamp of the pin makes a second run return at once.
# Env: PYTHON (default python3) builds the venv.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$REPO/.venv-franky-sim}"
PYTHON="${PYTHON:-python3}"
PIN="franky-sim==1.0.4"
STAMP="$VENV/.franky-sim-stamp"

log() { printf '[install_franky_sim] %s\n' "$*"; }

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$PIN" && -x "$VENV/bin/franky-sim" ]]; then
    log "$PIN present in $VENV"
    exit 0
fi
if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
log "installing $PIN"
"$VENV/bin/python" -m pip install --disable-pip-version-check -q "$PIN"
"$VENV/bin/python" -c "import franky_sim.mujoco_simulator" # MuJoCo + Pinocchio import
echo "$PIN" >"$STAMP"
log "done: $VENV/bin/franky-sim"
