"""``rlinf ros up CONFIG [key=value ...]``: start a ROS 2 node graph as processes.

The same YAML drives ``ros2 launch launch/<graph>.launch.py config:=CONFIG`` on machines with
ROS 2 launch installed; this subcommand is for machines (or wheels-only installs) without it.
``rlinf ros nodes CONFIG`` prints the command line of each node without starting anything.
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ros", help="ROS 2 robot graph: robot, cameras, policy client (rlinf ros up CONFIG)"
    )
    ros_sub = p.add_subparsers(dest="ros_command", metavar="ACTION", required=True)
    up = ros_sub.add_parser("up", help="start every node of the graph and supervise them")
    up.add_argument("config", help="graph YAML, e.g. configs/ros_sim_franka.yaml")
    up.add_argument(
        "overrides",
        nargs="*",
        help="key=value overrides, e.g. policy_client.server_url=ws://gpu:8000",
    )
    up.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="NODE",
        help="start only these nodes (by name); key=value words after it stay overrides",
    )
    up.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    nodes = ros_sub.add_parser("nodes", help="print each node's command line and exit")
    nodes.add_argument("config")
    nodes.add_argument("overrides", nargs="*")
    p.set_defaults(run=run)


def split_only(words: list[str] | None) -> tuple[list[str] | None, list[str]]:
    """(node names, overrides) from the words ``--only`` collected.

    Why: ``--only`` takes one or more words, so argparse hands it every word up to the next flag,
    overrides included; a node name never contains ``=`` nor starts with ``~`` (a deletion).

    >>> split_only(["robot", "policy_client.control_hz=5", "task"])
    (['robot', 'task'], ['policy_client.control_hz=5'])
    >>> split_only(None)
    (None, [])
    """
    if words is None:
        return None, []
    is_override = [("=" in w or w.startswith("~")) for w in words]
    return (
        [w for w, o in zip(words, is_override) if not o],
        [w for w, o in zip(words, is_override) if o],
    )


def check_only(only: list[str] | None, nodes: list[str], config: str) -> None:
    """Refuse names that are not nodes of the graph, naming them and the nodes there are."""
    from rlinf_contracts.config import ConfigError

    unknown = [n for n in only or [] if n not in nodes]
    if only is not None and not only:
        raise ConfigError(
            f"--only needs at least one node name; nodes of {config}: {', '.join(nodes)}"
        )
    if unknown:
        raise ConfigError(
            f"--only {', '.join(map(repr, unknown))}: not a node of {config}; "
            f"nodes: {', '.join(nodes)}"
        )


def run(args: argparse.Namespace) -> int:
    from rlinf_cli.preflight import check_streamer_token, check_ws_url
    from rlinf_ros.config import load_graph_config
    from rlinf_ros.graph import node_commands, up

    only, extra = split_only(getattr(args, "only", None))
    args.overrides = [*args.overrides, *extra]
    cfg = load_graph_config(args.config, args.overrides)
    check_only(only, list(cfg.node_names()), args.config)
    # the client reconnects until a server answers: check the form only
    if cfg.policy_client.enabled:
        check_ws_url(
            cfg.policy_client.server_url, "key 'policy_client.server_url'", must_listen=False
        )
    if args.ros_command == "nodes":
        for n in node_commands(cfg, args.config, args.overrides):
            print(f"{n.name} ({n.kind}): {' '.join(n.argv)}")
        return 0
    check_streamer_token(cfg, only)
    return up(args.config, args.overrides, only=only, duration_s=args.duration)
