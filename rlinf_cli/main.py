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
from pathlib import Path

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
    "online": "rlinf_cli.online",
    "convert": "rlinf_cli.convert",
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
    # no prefix matching: `--seed 3` (meant as the override `seed=3`) must not run `--seeds 3`
    for p in [parser, *sub.choices.values()]:
        p.allow_abbrev = False
    return parser


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse, letting ``key=value`` words follow flags: strays join the command's overrides."""
    words = [w for w in (sys.argv[1:] if argv is None else argv) if not w.startswith("-")]
    if words and words[0] not in SUBCOMMANDS:  # argparse on 3.11 lists the choices but guesses none
        close = difflib.get_close_matches(words[0], SUBCOMMANDS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        parser.error(f"unknown command {words[0]!r}{hint} (commands: {', '.join(SUBCOMMANDS)})")
    args, extra = parser.parse_known_args(argv)
    target = target_attr(args)
    flags = [
        w
        for w in extra
        if w.startswith("-") or target is None or ("=" not in w and not w.startswith("~"))
    ]
    if flags:
        parser.error(f"unrecognized arguments: {' '.join(flags)}{_flag_hint(parser, args, flags)}")
    if target is not None:
        setattr(args, target, [*getattr(args, target), *extra])
    return args


def _flag_hint(parser: argparse.ArgumentParser, args: argparse.Namespace, flags: list[str]) -> str:
    """ "; did you mean ...": the command's own flag closest to the first unknown one, and the
    ``key=value`` override when the flag names a config key (``--seed 3`` -> ``seed=3``)."""
    command = getattr(args, "command", None)
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    own = subs[0].choices.get(command) if subs and command else None
    known = [o for a in (own or parser)._actions for o in a.option_strings]
    name = flags[0].split("=", 1)[0]
    close = difflib.get_close_matches(name, known, n=1)
    hints = [f"the flag {close[0]}"] if close else []
    key = name[2:].replace("-", "_")
    if target_attr(args) is not None and key in _config_keys(getattr(args, "config", None)):
        hints.append(f"the override {key}=VALUE")
    return f"; did you mean {' or '.join(hints)}?" if hints else ""


def _config_keys(path: str | None) -> set[str]:
    """Top-level keys of the command's YAML config (empty when there is none or it is unreadable:
    the hint is a courtesy, the real error comes later with its own message)."""
    try:
        import yaml

        data = yaml.safe_load(Path(path).read_text()) if path else None
    except (OSError, ValueError, yaml.YAMLError):
        return set()
    return set(data) if isinstance(data, dict) else set()


def target_attr(args: argparse.Namespace) -> str | None:
    """The attribute holding the command's ``key=value`` overrides, if it takes any."""
    return next((a for a in _OVERRIDE_ATTRS if isinstance(getattr(args, a, None), list)), None)


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
