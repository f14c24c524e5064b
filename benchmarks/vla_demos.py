"""The language-conditioned demos the VLA benchmarks train on, collected once into a folder.

Why one place: the OOD ladder (``vla_ood.py``) and the ROS paths (``vla_ros.py``) fine-tune on
the same kind of demos -- ``franka_language/mix`` with the scripted expert, a little action
noise, the front camera -- so both collect them with the one call below.
"""

from __future__ import annotations

from pathlib import Path


def collect_language_demos(out: Path, episodes: int, image_size: int) -> None:
    """``rlinf collect`` of ``episodes`` ``franka_language/mix`` demos (state + front camera of
    ``image_size`` px, action noise 0.1) into ``out``; RuntimeError when collection fails."""
    from rlinf_cli.main import main

    demo_args = "--obs-mode state+rgb --noise 0.1 cameras=[front]"
    argv = ["collect", "franka_language/mix", "--episodes", str(episodes), *demo_args.split()]
    argv += ["--out", str(out), f"image_size={image_size}"]
    if main(argv) != 0:
        raise RuntimeError("demo collection failed")
