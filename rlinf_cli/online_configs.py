"""Each ``rlinf online`` stage's config, loaded and validated as its child will load it.

Why before any child: a child reads its config when it starts, and the learner starts after the
demos are collected (minutes of teleop); a mistyped key (``learner:train.time_budget=300``) must
be refused before the first child, by ``--dry-run`` alike, naming the stage and the key. Each
stage's command line (the plan's wiring plus the user's ``STAGE:`` overrides) is parsed by the
real ``rlinf`` parser and its config built by the loader that command uses (:data:`VALIDATORS`,
one per subcommand). Nothing is started, bound or written: a check here must pass on a machine
where the run directory, the token files and the demos do not exist yet. The tokens the plan
hands its children (``*_FILE`` variables, made by a real start) stand in as placeholders while
the configs are built, as the children will find them set; whether the real ones are usable is
``rlinf_cli.online_checks.check_tokens``'s question, asked separately.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rlinf_cli.errors import PreflightError
from rlinf_cli.online_plan import Plan
from rlinf_contracts.config.errors import ConfigError
from rlinf_contracts.registry import UnknownNameError
from rlinf_contracts.spec import SpecError
from rlinf_contracts.wire import MIN_SECRET_CHARS

# the mistakes in a config a user fixes (the CLI prints them as one line, as it does here)
CONFIG_ERRORS: tuple[type[Exception], ...] = (ConfigError, UnknownNameError, SpecError)


@contextmanager
def naming(stage: str) -> Iterator[None]:
    """A config mistake raised inside, re-raised as a refusal that names ``stage`` first."""
    try:
        yield
    except CONFIG_ERRORS as e:
        raise PreflightError(f"{stage}: {e}") from None


@contextmanager
def tokens_as_the_children_get_them(variables: list[str]) -> Iterator[None]:
    """Each of ``variables`` set (a placeholder, no ``*_FILE``) for the block, then restored as
    it was: the children get every plan token, so a config check must not refuse its absence."""
    names = [n for v in variables for n in (v, f"{v}_FILE")]
    saved = {n: os.environ.get(n) for n in names}
    try:
        for v in variables:
            os.environ[v] = "x" * MIN_SECRET_CHARS
            os.environ.pop(f"{v}_FILE", None)
        yield
    finally:
        for n, value in saved.items():
            if value is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = value


def _train(args: argparse.Namespace) -> None:
    from rlinf_cli.train import typed_config

    typed_config(args.config, list(args.overrides))


def _serve(args: argparse.Namespace) -> None:
    from rlinf_cli.serve import build_config

    build_config(args, env_secrets=False)  # the token files are the children's, made later


def _graph(config: str, overrides: list[str]) -> None:
    from rlinf_ros.config import load_graph_config

    load_graph_config(config, overrides)


VALIDATORS: dict[str, Callable[[argparse.Namespace], None]] = {
    "train": _train,
    "serve": _serve,
    "collect": lambda a: _graph(a.env, list(a.options)),  # a graph YAML: rlinf_cli.collect_ros
    "ros": lambda a: _graph(a.config, list(a.overrides)),
}


def check_stage_configs(p: Plan) -> None:
    """Every stage of ``p`` gets a config its command accepts, or the first that does not is
    refused: ``learner: unknown key 'train.time_budget'. Did you mean 'train.time_budget_s'?``."""
    from rlinf_cli.main import build_parser, parse_args

    parser = build_parser()
    with tokens_as_the_children_get_them([env for env, _ in p.tokens]):
        for stage in p.stages:
            with naming(stage.name):
                VALIDATORS[stage.argv[0]](parse_args(parser, list(stage.argv)))
