"""``rlinf list envs|tasks|models|algorithms|runners|rewards``: what a config can name.

The names come from the registries, so a newly registered one is listed without editing this file.
"""

from __future__ import annotations

import argparse

KIND_NAMES = ("envs", "tasks", "models", "algorithms", "runners", "rewards")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "list", help="list registered env families, tasks, models, algorithms, runners, rewards"
    )
    p.add_argument("kind", choices=KIND_NAMES, help="what to list")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rlinf_cli.registries import KINDS

    rows = KINDS[args.kind]()
    width = max((len(n) for n in rows), default=0)
    for name, text in rows.items():
        print(f"{name:<{width}}  {text}".rstrip())
    return 0
