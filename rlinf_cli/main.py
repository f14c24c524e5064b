"""``rlinf`` command line: one entry point, subcommands registered by name.

Each subcommand lives in its own small module exposing ``add_parser(subparsers)`` and
``run(args) -> int``; heavy imports (Ray, torch, simulators, rclpy) happen inside ``run`` so
``rlinf --help`` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from rlinf_contracts.config.errors import ConfigError
from rlinf_contracts.registry import UnknownNameError
from rlinf_contracts.spec import SpecError

# subcommand -> module; order is the order shown in --help
SUBCOMMANDS: dict[str, str] = {
    "train": "rlinf_cli.train",
    "eval": "rlinf_cli.eval",
    "serve": "rlinf_cli.serve",
    "ros": "rlinf_cli.ros",
    "spec": "rlinf_cli.spec",
    "config": "rlinf_cli.config_help",
    "collect": "rlinf_cli.collect",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlinf",
        description="rlinf-ros: one RL learner for real robots (ROS 2), simulators and LLM reasoning.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in SUBCOMMANDS.items():
        try:
            importlib.import_module(module).add_parser(sub)
        except ModuleNotFoundError as e:  # an optional part not installed / not built
            logging.getLogger(__name__).debug("subcommand %s unavailable: %s", name, e)
    return parser


def _default_environment() -> None:
    """Headless defaults, set before Ray starts so every worker inherits them."""
    if not os.environ.get("DISPLAY"):
        os.environ.setdefault("MUJOCO_GL", "osmesa")
        os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])


def main(argv: list[str] | None = None) -> int:
    _default_environment()
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname).1s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except (ConfigError, UnknownNameError, SpecError) as e:
        print(f"rlinf {args.command}: config error: {e}", file=sys.stderr)
        return 2
    except FileNotFoundError as e:
        print(f"rlinf {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rlinf {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
