# rlinf-ros learner / policy-server image: CUDA runtime, torch (CUDA build), Ray, the simulators
# and the GPU extras, installed by the same scripts/bootstrap.sh as `make setup`.
#
#   docker build -f docker/learner.Dockerfile -t rlinf-ros-learner .
#   docker run --gpus all rlinf-ros-learner train configs/sim_franka_reach_ppo.yaml
#   docker run --gpus all -p 8000:8000 -e RLINF_API_KEY_FILE=/run/secrets/api_key \
#       rlinf-ros-learner serve --checkpoint /runs/x/checkpoints/final --host 0.0.0.0
#
# EXTRAS=learner,sim,dev (no gpu) builds a smaller image without vLLM / SGLang.
# Not built here: this project's machines have no Docker engine (hadolint checks it in make test).
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu22.04
FROM python:3.11-slim-bookworm AS python311

FROM ${CUDA_IMAGE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY --from=python311 /usr/local/ /usr/local/
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends make git ca-certificates libssl3 libsqlite3-0 libffi8 \
    && rm -rf /var/lib/apt/lists/* \
    && ldconfig && python3.11 --version
WORKDIR /opt/rlinf-ros
COPY . .
ENV MUJOCO_GL=egl PYOPENGL_PLATFORM=egl PYTHON=/usr/local/bin/python3.11 RAY_AUTH_MODE=disabled
ARG EXTRAS=learner,sim,llm,gpu
RUN EXTRAS="$EXTRAS" make setup
ENV PATH=/opt/rlinf-ros/.venv/bin:$PATH
EXPOSE 8000 6379 8265 10001
ENTRYPOINT ["/opt/rlinf-ros/.venv/bin/rlinf"]
CMD ["--help"]
