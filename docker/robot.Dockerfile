# rlinf-ros robot-PC image: ROS 2 Jazzy (drivers, franka_ros2, realsense2_camera live here) and the
# `robot` extra of rlinf-ros in .venv (ROS nodes + policy client; no torch, no Ray), installed by
# the same scripts/bootstrap.sh as `make setup`, so this image and a robot PC cannot drift apart.
#
#   docker build -f docker/robot.Dockerfile -t rlinf-ros-robot .
#   docker build -f docker/robot.Dockerfile --build-arg EXTRAS=robot,sim -t rlinf-ros-robot-sim .
#   docker build -f docker/robot.Dockerfile --build-arg HARDWARE="pylibfranka pyrealsense2" ...
#
# The ros-kilted-* wheels of the robot extra are CPython 3.11 builds; Jazzy's Ubuntu 24.04 ships
# 3.12, so CPython 3.11 is copied from the official python image. The venv does not see the
# Jazzy Python packages: do not source /opt/ros/jazzy/setup.bash in the shell that runs rlinf.
# Not built here: this project's machines have no Docker engine (hadolint checks it in make test).
ARG ROS_DISTRO=jazzy
FROM python:3.11-slim-bookworm AS python311

FROM ros:${ROS_DISTRO}-ros-base
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY --from=python311 /usr/local/ /usr/local/
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends make git ca-certificates libssl3t64 libsqlite3-0 libffi8 \
    && rm -rf /var/lib/apt/lists/* \
    && ldconfig && python3.11 --version
WORKDIR /opt/rlinf-ros
COPY . .
ENV MUJOCO_GL=osmesa PYOPENGL_PLATFORM=osmesa PYTHON=/usr/local/bin/python3.11 RMW_IMPLEMENTATION=rmw_fastrtps_cpp
ARG EXTRAS=robot
# Optional drivers as pip packages, e.g. "pylibfranka pyrealsense2" (pyzed comes with the ZED SDK
# installer, not PyPI: install it in an image built FROM this one).
ARG HARDWARE=""
RUN EXTRAS="$EXTRAS" make setup \
    && echo "$HARDWARE" | xargs -r .venv/bin/python -m pip install --no-cache-dir
ENV PATH=/opt/rlinf-ros/.venv/bin:$PATH
ENTRYPOINT ["/opt/rlinf-ros/.venv/bin/rlinf"]
CMD ["ros", "up", "configs/ros_sim_franka.yaml"]
