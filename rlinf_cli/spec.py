"""``rlinf spec SOURCE`` / ``--shared A B ...``: robot specs as the YAML a ROS policy client takes.

- ``rlinf spec mujoco_franka/reach [key=value ...]``: the spec of a simulator task (env options as
  overrides, e.g. ``obs_mode=rgb``), i.e. what a policy trained there expects from a robot;
- ``rlinf spec runs/sim_franka_reach_ppo``: the spec a checkpoint carries (what ``rlinf serve``
  announces and checks clients against);
- ``rlinf spec --shared A B [C ...]``: robots of different specs (env names, checkpoints or ROS
  graph YAMLs) feeding one learner: each robot's spec restricted to what all of them share, and
  what each gives up (``rlinf_contracts.spec_shared``).

Paste the output under ``policy_client.robot_spec`` of a graph YAML; the test suite checks the
shipped sim-twin config against the simulator in the same way.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import yaml

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "spec",
        help="print the robot spec of an env or a checkpoint (YAML for policy_client.robot_spec)",
    )
    p.add_argument("source", nargs="?", help="env name (family/task) or checkpoint / run directory")
    p.add_argument(
        "options", nargs="*", help="env options as key=value (env names only), e.g. obs_mode=rgb"
    )
    p.add_argument(
        "--shared",
        nargs="+",
        metavar="SOURCE",
        help="print the spec each robot runs to share one learner: env names, checkpoints or ROS "
        "graph YAMLs (their policy_client.robot_spec), at least two",
    )
    p.set_defaults(run=run)


def _flow_lists(data: dict) -> str:
    """YAML with short lists inline ([name, size] rows), as the shipped configs write them."""

    class Dumper(yaml.SafeDumper):
        pass

    def represent_list(dumper: yaml.SafeDumper, value: list) -> yaml.Node:
        flow = all(not isinstance(v, (dict, list)) for v in value) or all(
            isinstance(v, list) for v in value
        )
        return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=flow)

    Dumper.add_representer(list, represent_list)
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, width=200)


def load_spec(source: str, options: list[str]):
    from rlinf_contracts.config import ConfigError, load_config

    if Path(source).exists():
        if options:
            raise ConfigError("options apply to env names only, not to checkpoints")
        from learner.checkpoint import load_checkpoint, policy_spec_of

        ckpt = load_checkpoint(source)
        return policy_spec_of(ckpt.meta, ckpt.path).robot_spec()
    from rlinf_contracts.env_registry import make_env

    kwargs = load_config(None, options) if options else {}
    env = make_env(source, 1, **kwargs)
    try:
        if env.spec.robot is None:
            raise ConfigError(
                f"env '{source}' declares no robot spec (its state has no named layout)"
            )
        return env.spec.robot
    finally:
        env.close()


def load_robot_spec(source: str):
    """The spec of one robot of ``--shared``: a ROS graph YAML's ``policy_client.robot_spec``,
    else what ``rlinf spec SOURCE`` prints."""
    if Path(source).suffix in (".yaml", ".yml"):
        from rlinf_contracts.config import ConfigError
        from rlinf_ros.config import load_graph_config

        if not Path(source).is_file():
            raise ConfigError(f"no such graph YAML: {source}")
        return load_graph_config(source).policy_client.spec()
    return load_spec(source, [])


def run(args: argparse.Namespace) -> int:
    from rlinf_contracts.config import ConfigError

    if args.shared is not None:
        if args.source is not None:
            raise ConfigError(
                f"rlinf spec: give either SOURCE or --shared, not both (got {args.source!r})"
            )
        return run_shared(args.shared)
    if args.source is None:
        raise ConfigError("rlinf spec: give an env name or checkpoint, or --shared A B ...")
    spec = load_spec(args.source, list(args.options))
    print(f"# {spec.describe()}")
    print(_flow_lists({"robot_spec": spec.to_dict()}), end="")
    return 0


def run_shared(sources: list[str]) -> int:
    """One YAML document per robot: the spec to put under its ``policy_client.robot_spec``."""
    from rlinf_contracts.config import ConfigError
    from rlinf_contracts.spec_shared import dropped, restrict, shared_spec

    twice = sorted({s for s in sources if sources.count(s) > 1})
    if twice:
        raise ConfigError(f"rlinf spec --shared: {', '.join(twice)} listed more than once")
    specs = {source: load_robot_spec(source) for source in sources}
    shared = shared_spec(specs)
    print(f"# shared by {len(specs)} robots: {shared.describe()}")
    fields = ",".join(f.name for f in shared.state)
    cameras = ",".join(c.name for c in shared.cameras)
    print(  # the learner's env presents the same layout: its network and ingest follow it
        f"# learner: env.kwargs.state_fields=[{fields}]"
        + (f" env.kwargs.cameras=[{cameras}]" if cameras else "")
    )
    for source, spec in specs.items():
        print(f"---\n# {source}: put under policy_client.robot_spec")
        print(f"# dropped from {source}: {dropped(spec, shared)}")
        print(_flow_lists({"robot_spec": restrict(spec, shared).to_dict()}), end="")
    return 0
