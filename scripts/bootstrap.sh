#!/usr/bin/env bash
# Set up rlinf-ros from scratch on a Debian/Ubuntu machine: system packages, .venv, torch first
# (only when EXTRAS has `learner`), then the project with the extras named in EXTRAS. A robot PC:
# `EXTRAS=robot bash scripts/bootstrap.sh` (no torch, no Ray; add `sim` for the MuJoCo twin).
# Idempotent: a second run with unchanged inputs only checks a stamp and returns in about a second.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
EXTRAS="${EXTRAS:-learner,sim,robot,llm,maniskill,dev}"
TORCH_PIN="torch==2.13.0"
APT_PACKAGES=(libosmesa6 libgl1 libegl1 libglfw3 libusb-1.0-0 ffmpeg)
# chromium: the headless browser of the live view's tests (tests/learner/live); node and npm: the
# Foxglove libraries that read the recorder's bags (tests/foxglove). Dev extra only. npm only when
# missing: a NodeSource nodejs bundles its own npm and conflicts with Debian's package.
if [[ ",$EXTRAS," == *",dev,"* ]]; then
    APT_PACKAGES+=(chromium)
    command -v node >/dev/null || APT_PACKAGES+=(nodejs)
    command -v npm >/dev/null || APT_PACKAGES+=(npm)
fi

log() { printf '[bootstrap] %s\n' "$*"; }

# A first install with the learner (torch, the extras, franky-sim's venv) takes about 5.5 GB, a
# robot PC's far less; pip fails late with "[Errno 28] No space left on device" in the middle of
# a wheel, so a new venv checks the disk before it starts.
if [[ ",$EXTRAS," == *",learner,"* ]]; then NEED_GB="${BOOTSTRAP_NEED_GB:-7}"; else NEED_GB="${BOOTSTRAP_NEED_GB:-2}"; fi
check_disk() {
    local dir
    dir="$(dirname "$VENV")"
    local free_kb
    free_kb="$(df -Pk "$dir" | awk 'NR == 2 {print $4}')"
    if ((free_kb < NEED_GB * 1024 * 1024)); then
        log "ERROR: $((free_kb / 1024)) MB free on the disk of $dir; installing needs about ${NEED_GB} GB."
        log "Free some space (old runs/ directories, other checkouts' .venv) and run again;"
        log "BOOTSTRAP_NEED_GB=N lowers the threshold if you know the install needs less."
        exit 1
    fi
}

install_apt() {
    local missing=()
    for pkg in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    if ((${#missing[@]} == 0)); then
        log "system packages present"
        return
    fi
    if ! command -v apt-get >/dev/null; then
        log "WARNING: no apt-get; install these yourself: ${missing[*]}"
        return
    fi
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    log "installing system packages: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Foxglove's MCAP and ROS 2 readers at the lock's versions (tests/rlinf_ros/test_bag_foxglove.py),
# reinstalled only when node_modules is missing or the lock changed.
install_foxglove_reader() {
    local dir="$ROOT/tests/foxglove"
    local stamp="$dir/node_modules/.lock-stamp"
    local want
    want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        return
    fi
    if ! command -v npm >/dev/null; then
        log "WARNING: no npm; install nodejs and npm, then run: npm ci --prefix tests/foxglove"
        return
    fi
    log "installing Foxglove's bag readers (npm ci --prefix tests/foxglove)"
    npm ci --prefix "$dir" --silent --no-audit --no-fund >/dev/null
    echo "$want" >"$stamp"
}

stamp_inputs() {
    cat "$ROOT/pyproject.toml" "$ROOT/scripts/bootstrap.sh" "$ROOT/scripts/install_maniskill.sh" \
        "$ROOT/scripts/install_franky_sim.sh"
    echo "$EXTRAS"
}

main() {
    install_apt
    if [[ ",$EXTRAS," == *",dev,"* ]]; then install_foxglove_reader; fi
    local stamp="$VENV/.bootstrap-stamp"
    local want
    want="$(stamp_inputs | sha256sum | cut -d' ' -f1)"
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        log ".venv up to date (extras: $EXTRAS)"
        return
    fi
    if [[ ! -x "$VENV/bin/python" ]]; then
        check_disk
        log "creating $VENV"
        "$PYTHON" -m venv "$VENV"
    fi
    local pip=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
    "${pip[@]}" --upgrade pip setuptools wheel
    if [[ ",$EXTRAS," == *",learner,"* ]]; then
        log "installing $TORCH_PIN first (CPU build from local disk here, CUDA build on GPU machines)"
        "${pip[@]}" "$TORCH_PIN"
    fi
    log "installing rlinf-ros[$EXTRAS] (editable)"
    "${pip[@]}" -e "$ROOT[$EXTRAS]"
    if [[ ",$EXTRAS," == *",sim,"* ]]; then
        # Only robosuite's bundled Panda assets and its env API are used; see pyproject.toml.
        "${pip[@]}" --no-deps "robosuite==1.5.2"
    fi
    if [[ ",$EXTRAS," == *",maniskill,"* ]]; then
        log "installing ManiSkill3 (system Vulkan lavapipe + mani-skill, see scripts/install_maniskill.sh)"
        bash "$ROOT/scripts/install_maniskill.sh" "$VENV"
    fi
    if [[ ",$EXTRAS," == *",dev,"* ]]; then
        # franky-sim, the simulated Franka of the libfranka backend's tests, in a venv of its
        # own (it pins mujoco 4; see scripts/install_franky_sim.sh and docs/real_franka.md)
        bash "$ROOT/scripts/install_franky_sim.sh"
        # openpi-client pins numpy<2 in its metadata but runs on numpy 2: it is the reference
        # client of our policy server in the tests, so install it without its pins.
        "${pip[@]}" --no-deps "openpi-client==0.1.2"
        # LeRobot's own dataset reader checks our LeRobot v3.0 export (tests/rlinf_data/
        # test_lerobot.py runs it in a subprocess with this directory on its path). lerobot 0.4.4
        # pins torch<2.11 and datasets an older fsspec, so they go in without their pins, with
        # torchvision 0.28 (the release for torch 2.13), in a directory of their own: that
        # torchvision's C ops need a CUDA torch, and in the venv it would break `import
        # transformers`. PyAV writes and reads the mp4s (rlinf_data/lerobot.py).
        if [[ ",$EXTRAS," == *",learner,"* ]]; then
            "${pip[@]}" --no-deps --upgrade --target "$VENV/lerobot-reader" \
                "lerobot==0.4.4" "datasets==4.8.5" "torchvision==0.28.0"
            "${pip[@]}" "av>=15,<16" pandas "dill>=0.3.0,<0.4.2" "multiprocess<0.70.20" xxhash "httpx<1"
        fi
    fi
    echo "$want" >"$stamp"
    log "done: $VENV"
}

main "$@"
