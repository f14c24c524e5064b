#!/usr/bin/env bash
# GPU check: full-size OpenVLA-OFT and π0 adapters (random bf16 weights: forward + one LoRA step),
# the policy server's batched latency at 1 / 8 / 32 clients and MuJoCo EGL rendering, on one CUDA
# device in about 8 minutes (benchmarks/gpu_check.py says what each part measures).
#
# The device run (repository root of the working tree, one CUDA GPU, no network; its python3 holds
# a CUDA torch, transformers and peft), carrying the ignored wheel folder:
#     command: bash scripts/gpu_check.sh      carry: [".gpu_wheels"]      timeout: 600 s
# It installs the carried wheels into /tmp/gpu_check_site (PYTHONPATH; torch is never touched),
# then writes benchmarks/results/gpu_check.json and .md (copy them out with the run's files).
#
# Before it, on a machine with the package index and this repository's .venv:
#     bash scripts/gpu_check.sh --build-wheels   # fills .gpu_wheels/ (~16 MiB) for Python 3.12
# And anywhere, the same code on the CPU at tiny sizes (~1 minute, results in a temp folder):
#     bash scripts/gpu_check.sh --smoke [OUT_DIR]
#
# Without a CUDA device the GPU mode stops at once with exit code 3.
set -euo pipefail
cd "$(dirname "$0")/.."

WHEELS=.gpu_wheels
SITE=${GPU_CHECK_SITE:-/tmp/gpu_check_site}
# the device image's Python: the binary wheels below (mujoco, websockets) are built for it
TARGET_PY=${GPU_CHECK_PYTHON_VERSION:-3.12}
# what the device image lacks of what the parts import (it has numpy, pyyaml, msgpack, safetensors,
# absl-py, etils, tqdm): MuJoCo with its GL bindings, the policy server's websockets, the config
# loader's omegaconf. Versions as in this repository's .venv.
PACKAGES=(
    mujoco==3.3.7
    glfw==2.11.0
    PyOpenGL==3.1.10
    websockets==17.4
    omegaconf==2.4.0
)

local_python() {
    if [[ -x .venv/bin/python ]]; then echo .venv/bin/python; else echo python3; fi
}

build_wheels() {
    local py
    py=$(local_python)
    rm -rf "$WHEELS" && mkdir -p "$WHEELS"
    "$py" -m pip download -q --no-deps --only-binary=:all: --python-version "$TARGET_PY" \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform manylinux1_x86_64 -d "$WHEELS" "${PACKAGES[@]}"
    # the Panda meshes the Franka scene reads, not the whole robosuite wheel
    MUJOCO_GL=osmesa "$py" benchmarks/gpu_check.py --pack-panda-assets "$WHEELS/panda_assets.zip"
    ls -1 "$WHEELS"
    echo "$WHEELS: $(du -sh "$WHEELS" | cut -f1) (carry it: the device run's limit is 64 MiB)"
}

require_cuda() {
    if ! python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
        echo "gpu_check: no CUDA device visible to python3's torch: this check needs one GPU." >&2
        echo "           bash scripts/gpu_check.sh --smoke runs the same code on the CPU." >&2
        exit 3
    fi
}

install_wheels() {
    if ! compgen -G "$WHEELS/*.whl" >/dev/null; then
        echo "gpu_check: no wheels in $WHEELS: run --build-wheels where pip can download," \
            "and carry $WHEELS" >&2
        exit 4
    fi
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" "$WHEELS"/*.whl
    python3 -m zipfile -e "$WHEELS/panda_assets.zip" "$SITE"
    export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
}

case "${1:-}" in
--build-wheels)
    build_wheels
    ;;
--smoke)
    export RAY_AUTH_MODE=disabled
    "$(local_python)" benchmarks/gpu_check.py --smoke ${2:+--out "$2"}
    ;;
"")
    require_cuda
    install_wheels
    export PYTHONUNBUFFERED=1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
    python3 benchmarks/gpu_check.py
    ;;
*)
    echo "usage: bash scripts/gpu_check.sh [--build-wheels | --smoke [OUT_DIR]]" >&2
    exit 2
    ;;
esac
