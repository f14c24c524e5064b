"""What ``rlinf online`` refuses before any child starts, for the real run and ``--dry-run`` alike.

Why one list for both: a dry run exists to catch the mistakes a real start would hit, so it must
refuse exactly what the real run refuses, with the same message and fix. Refused here (each a
:class:`~rlinf_cli.errors.PreflightError` of one line naming the key or flag and the fix):

- a ``--teleop`` that names no teleop device, whether or not demos are collected this time;
- a stage config its child would refuse (a mistyped key in a ``STAGE:`` override, a bad value):
  each stage's command line validated by its command's own loader (``rlinf_cli.online_configs``);
- a bench GPU box (``--role learner``) without the successful demos the learner starts from;
- a listen port already taken (the learner's ingest, the policy server): found here rather than
  by the learner child after its start-up, or by the server child after the learner's initial
  actor;
- a token the children could not use: an exported ``*_FILE`` that cannot be read, an empty token,
  or one shorter than the servers accept.

``train.out_dir`` holding a run, ``--role`` without ``--peer`` and ``--resume`` with
``--new-run`` are refused while the request is built (``rlinf_cli.online.build_request``), which
both runs do first. None of these checks writes anything.
"""

from __future__ import annotations

from collections.abc import Callable

from rlinf_cli.errors import PreflightError
from rlinf_cli.online_configs import check_stage_configs
from rlinf_cli.online_plan import Plan, Request
from rlinf_cli.preflight import ListenPort, check_listen_port
from rlinf_cli.secret_files import TokenFile, read_token
from rlinf_contracts.wire import MIN_SECRET_CHARS


def _teleop_device(r: Request, p: Plan) -> None:
    """The device the demos are recorded with; checked even when the demos are there already, so
    a typo does not wait for the day they are missing."""
    from rlinf_contracts.registry import did_you_mean
    from rlinf_ros.online_config import TELEOP_DEVICES

    if r.teleop not in TELEOP_DEVICES:
        raise PreflightError(
            f"--teleop {r.teleop!r} is not a teleop device{did_you_mean(r.teleop, TELEOP_DEVICES)} "
            f"(devices: {', '.join(TELEOP_DEVICES)})"
        )


def _stage_configs(r: Request, p: Plan) -> None:
    check_stage_configs(p)


def _demos_on_the_bench(r: Request, p: Plan) -> None:
    """A GPU box collects no demos (the robot PC does): they must be there already."""
    if r.role == "learner" and r.demos_have < r.demos_wanted:
        raise PreflightError(
            f"key 'train.demos': {r.demos} holds {r.demos_have} successful demos of --demos "
            f"{r.demos_wanted}; record them on the robot PC (rlinf online ... --role robot) and "
            f"copy them here: rsync -a {r.peer}:{r.demos}/ {r.demos}/"
        )


def _listen_ports(r: Request, p: Plan) -> None:
    """The ports the plan's learner and server stages listen on, bound the way they will be."""
    other = {"ingest": r.ingest_port + 1, "server": r.server_port + 1}
    ports = {
        "learner": ListenPort(
            "ingest.port",
            r.bind_host,
            r.ingest_port,
            f"--ingest-port {other['ingest']} (or learner:ingest.port={other['ingest']})",
        ),
        "server": ListenPort(
            "push.url",
            r.bind_host,
            r.server_port,
            f"--server-port {other['server']} (or learner:push.url=ws://HOST:{other['server']})",
        ),
    }
    for name in p.names:
        if name in ports:
            check_listen_port(ports[name])


# the checks of a request and its plan, in the order a start meets them
CHECKS: tuple[Callable[[Request, Plan], None], ...] = (
    _teleop_device,
    _stage_configs,
    _demos_on_the_bench,
    _listen_ports,
)


def check_start(r: Request, p: Plan) -> None:
    for check in CHECKS:
        check(r, p)


def check_tokens(tokens: list[TokenFile]) -> None:
    """Every token a child will read is readable and long enough (a file of ours that a dry run
    has not made yet passes: the real run makes it)."""
    for t in tokens:
        where = f"${t.given}" if t.given else str(t.path)
        try:
            value = read_token(t)
        except OSError as e:
            fix = (
                f"fix the path, or unset {t.given} to use a token file made for you"
                if t.given
                else "fix its permissions, or delete it to have a new one made"
            )
            raise PreflightError(
                f"token {t.env}: cannot read {t.path} ({where}: {e.strerror}); {fix}"
            ) from None
        if value is not None and len(value) < MIN_SECRET_CHARS:
            raise PreflightError(
                f"token {t.env} ({where}) is {'empty' if not value else 'too short'}: the "
                f"servers refuse a token under {MIN_SECRET_CHARS} characters; write a longer one "
                f"there (e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
            )
