#!/usr/bin/env bash
# Install ManiSkill3 (mani-skill 3.0.1, sapien 3.0.3) for the `maniskill` extra, CPU-capable.
#
# Why this is a script and not just a pyproject extra:
#  * On a CPU, SAPIEN needs a Vulkan device even for state observations (it builds render
#    materials with every task scene). Debian 12's Mesa 22.3 lavapipe is too old ("failed to
#    find a rendering device"); Mesa >= 24.3 is needed, i.e. mesa-vulkan-drivers from
#    bookworm-backports. Only that package (+ libdrm) is taken from backports, so the system
#    OSMesa / GL used by MuJoCo stays at the Debian 12 version.
#  * `pip install mani-skill` would pull `opencv-python` (via sapien) next to the project's
#    `opencv-python-headless`: both own the `cv2` package and overwrite each other. So sapien
#    and mani-skill go in with --no-deps and their real dependencies are listed below, without
#    opencv-python. torch and numpy are pinned to the versions already installed.
#
# Usage (root, or a user with sudo; idempotent: re-running is a no-op apart from pip's checks):
#   scripts/install_maniskill.sh [PATH/TO/VENV]        # default: .venv in the repository root
# Env: SKIP_APT=1 skips the system step (e.g. in a container image that already has it).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$REPO/.venv}"
PY="$VENV/bin/python"
[ -x "$PY" ] || { echo "install_maniskill: no python at $PY; pass the venv path as \$1" >&2; exit 2; }

SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "install_maniskill: needs root or sudo for apt" >&2; exit 2; }
  SUDO="sudo"
fi

# ----------------------------------------------------------------------------- system: Vulkan
lavapipe_ok() {
  # mesa-vulkan-drivers >= 24.3 installed and its lavapipe ICD present
  local v
  v="$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || true)"
  [ -n "$v" ] && dpkg --compare-versions "$v" ge 24.3 && [ -f /usr/share/vulkan/icd.d/lvp_icd.json ]
}

if [ "${SKIP_APT:-0}" != 1 ] && ! lavapipe_ok; then
  . /etc/os-release
  if [ "${VERSION_CODENAME:-}" = bookworm ]; then
    list=/etc/apt/sources.list.d/backports.list
    if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
      echo "deb http://deb.debian.org/debian bookworm-backports main" | $SUDO tee "$list" >/dev/null
    fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      libvulkan1 libegl1 libgl1 mesa-vulkan-drivers/bookworm-backports
  else
    # newer distros (trixie, noble+) ship Mesa >= 24.3 in their main archive
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
      libvulkan1 libegl1 libgl1 mesa-vulkan-drivers
  fi
  lavapipe_ok || { echo "install_maniskill: lavapipe (Mesa >= 24.3) still missing after apt" >&2; exit 1; }
fi

# ----------------------------------------------------------------------------- python packages
pins="$(mktemp)"
trap 'rm -f "$pins"' EXIT
"$PY" - >"$pins" <<'EOF'
import importlib.metadata as md
for name in ("torch", "numpy"):
    try:
        print(f"{name}=={md.version(name)}")
    except md.PackageNotFoundError:
        pass
EOF

PIP=("$PY" -m pip install -q -c "$pins")
# real dependencies of mani-skill 3.0.1 and sapien 3.0.3, minus opencv-python (see above)
"${PIP[@]}" numpy scipy dacite "gymnasium>=0.29.1" h5py pyyaml tqdm GitPython tabulate \
  transforms3d trimesh "imageio[ffmpeg]" "mplib==0.1.1" IPython "pytorch_kinematics==0.7.6" \
  defusedxml nvidia-ml-py "tyro>=0.8.5" huggingface_hub requests lxml networkx pyperclip \
  setuptools importlib_resources
"$PY" -c "import cv2" 2>/dev/null || "${PIP[@]}" opencv-python-headless
"${PIP[@]}" --no-deps "sapien==3.0.3" "mani-skill==3.0.1"

# ----------------------------------------------------------------------------- smoke check
"$PY" - <<'EOF'
import gymnasium as gym
import mani_skill.envs  # noqa: F401

env = gym.make("PickCube-v1", num_envs=1, obs_mode="state", sim_backend="physx_cpu", render_backend="none")
obs, _ = env.reset(seed=0)
env.step(env.action_space.sample())
env.close()
print(f"install_maniskill: ok (PickCube-v1 on physx_cpu, state dim {obs.shape[-1]})")
EOF
