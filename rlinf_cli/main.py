"""``rlinf`` command line: one entry point, subcommands registered by name.

Each subcommand lives in its own small module exposing ``add_parser(subparsers)`` and
``run(args) -> int``; heavy imports (Ray, torch, simulators, rclpy) happen inside ``run`` so
``rlinf --help`` stays instant. ``key=value`` overrides may stand anywhere after the
subcommand (``rlinf train CONFIG --dry-run actor.lr=1e-3``). Mistakes a user can fix (a key,
a name, a path, a URL, a cluster address) end as one or two lines on stderr naming the key,
exit code 2; never a traceback (``-v`` adds one for debugging).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import logging
import os
import sys

from rlinf_cli.errors import USER_ERRORS, describe

# subcommand -> module; order is the order shown in --help
SUBCOMMANDS: dict[str, str] = {
    "train": "rlinf_cli.train",
    "eval": "rlinf_cli.eval",
    "serve": "rlinf_cli.serve",
    "ros": "rlinf_cli.ros",
    "spec": "rlinf_cli.spec",
    "config": "rlinf_cli.config_help",
    "collect": "rlinf_cli.collect",
    "schedule": "rlinf_cli.schedule",
    "list": "rlinf_cli.listing",
    "completion": "rlinf_cli.completion",
}
# positional list attributes that collect stray key=value words (first one a command has wins)
_OVERRIDE_ATTRS = ("overrides", "options")
# chatty third-party loggers: their INFO lines appear on every command
_QUIET_LOGGERS = ("OpenGL", "OpenGL.acceleratesupport", "absl", "matplotlib", "PIL")


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("rlinf-ros")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlinf",
        description="rlinf-ros: one RL learner for real robots (ROS 2), simulators and LLM "
        "reasoning.",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="debug logging, tracebacks on errors"
    )
    parser.add_argument("--version", action="version", version=f"rlinf {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in SUBCOMMANDS.items():
        try:
            importlib.import_module(module).add_parser(sub)
        except ModuleNotFoundError as e:  # an optional part not installed / not built
            logging.getLogger(__name__).debug("subcommand %s unavailable: %s", name, e)
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse, letting ``key=value`` words follow flags: strays join the command's overrides."""
    words = [w for w in (sys.argv[1:] if argv is None else argv) if not w.startswith("-")]
    if words and words[0] not in SUBCOMMANDS:  # argparse on 3.11 lists the choices but guesses none
        close = difflib.get_close_matches(words[0], SUBCOMMANDS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        parser.error(f"unknown command {words[0]!r}{hint} (commands: {', '.join(SUBCOMMANDS)})")
    args, extra = parser.parse_known_args(argv)
    target = next((a for a in _OVERRIDE_ATTRS if isinstance(getattr(args, a, None), list)), None)
    flags = [
        w
        for w in extra
        if w.startswith("-") or target is None or ("=" not in w and not w.startswith("~"))
    ]
    if flags:
        parser.error(f"unrecognized arguments: {' '.join(flags)}")
    if target is not None:
        setattr(args, target, [*getattr(args, target), *extra])
    return args


def _default_environment() -> None:
    """Headless defaults, set before Ray starts so every worker inherits them."""
    if not os.environ.get("DISPLAY"):
        os.environ.setdefault("MUJOCO_GL", "osmesa")
        os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])


def _logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname).1s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    if not verbose:
        for name in _QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    _default_environment()
    parser = build_parser()
    args = parse_args(parser, argv)
    _logging(args.verbose)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(args.run(args) or 0)
    except USER_ERRORS as e:
        if args.verbose:
            logging.getLogger(__name__).exception("details")
        print(f"rlinf {args.command}: {describe(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"rlinf {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
