"""``rlinf config RUNNER``: list every config key of a runner with its type, default and help."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="list the config keys of a runner (embodied, reasoning)")
    p.add_argument("runner", nargs="?", default="embodied")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rlinf_cli.runner_lookup import runner_spec
    from rlinf_contracts.config import help_text

    for line in help_text(runner_spec(args.runner).config_cls):
        print(line)
    return 0
