"""Checks before anything starts: what a config names must exist, where it points must answer.

``rlinf train`` (with or without ``--dry-run``), ``rlinf eval`` and ``rlinf ros up`` run these
after the typed config is built and before Ray, a worker, a simulator or a node starts. Each
failure is a :class:`~rlinf_cli.errors.PreflightError` (or ``ConnectionError``) of one or two
lines naming the key and the fix:

- placement against the slots that will exist (``learner.cluster.expected_slots``);
- registry names: env family and task, model, runner, algorithm (``algorithm.adv`` is checked
  when the config is built), LLM rewards, with "did you mean";
- paths: ``train.resume``, data files of the reasoning runner;
- URLs: a policy server (``ws://HOST:PORT``) must be well formed and, for ``rlinf eval``,
  listening; ``--ray-address`` must name a running cluster;
- listen ports: the ingest of a learner (``ingest.port``) and the policy server of ``rlinf
  serve`` (``server.port``) must be free *before* anything loads: a busy port found when the
  learner opens its ingest costs the whole start-up and demo pretraining first;
- ``train.out_dir``: a directory that already holds a run is refused unless the run resumes it
  (:func:`check_out_dir`): a second run there would reuse the first one's initial actor and
  episode store and leave its checkpoints beside the new ones.
"""

from __future__ import annotations

import difflib
import errno
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from rlinf_cli.errors import PreflightError

log = logging.getLogger(__name__)
PLACEMENT_COMPONENTS = {"EmbodiedConfig": ("env", "rollout", "actor")}
GPU_ONLY_BACKENDS = ("vllm", "sglang")
# written into a run's out_dir by a launcher just before the run starts (``rlinf train --seeds``
# opens ``<out_dir>/seed_<k>/train.log`` for the seed's own ``rlinf train``; ``rlinf online`` its
# children's ``logs/`` and the robot's ``spool/``): not a previous run
LAUNCHER_FILES = frozenset({"train.log", "logs", "spool"})


def _near(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    return f" Did you mean '{close[0]}'?" if close else ""


def check_env_name(name: str, key: str = "env.name") -> None:
    """Env family and, where the family lists them, the task."""
    from rlinf_cli.registries import env_families, env_tasks

    family, _, task = name.partition("/")
    families = list(env_families())
    if family not in families:
        raise PreflightError(
            f"key '{key}': unknown env family '{family}' in '{name}'.{_near(family, families)} "
            f"Known: {', '.join(families)} (rlinf list envs)"
        )
    known = env_tasks(family)
    if known is not None and task not in known:
        close = difflib.get_close_matches(task, known, n=1, cutoff=0.5)
        suggestion = f" Did you mean '{family}/{close[0]}'?" if close else ""
        raise PreflightError(
            f"key '{key}': unknown {family} task '{task}'.{suggestion} "
            f"Known: {', '.join(f'{family}/{t}' for t in known)} (rlinf list tasks)"
        )


def check_model(name: str, key: str = "model.name") -> None:
    from learner.models import MODELS

    if name not in MODELS:
        raise PreflightError(
            f"key '{key}': unknown model '{name}'.{_near(name, MODELS.names())} "
            f"Known: {', '.join(MODELS.names())} (rlinf list models)"
        )


def check_placement(
    placement: dict[str, Any], components: tuple[str, ...] | None, cluster: Any
) -> None:
    """Parse the placement against the slots the embedded cluster will have (skipped when
    joining one)."""
    from learner.cluster import expected_slots
    from learner.placement import PlacementError, parse_placement

    slots = expected_slots(cluster)
    if slots is None:
        return
    try:
        parse_placement(placement, slots[0], list(components) if components else None)
    except PlacementError as e:
        placed = [c.strip() for key in placement for c in str(key).split(",")]
        names = ",".join(components or placed)
        fix = (
            f"this machine has {slots[0]} {slots[1].upper()} slot(s) (0-{slots[0] - 1}); "
            f"e.g. placement.{names}=0 (all on one slot) or set cluster.num_cpus"
        )
        raise PreflightError(f"key 'placement': {e}\n  fix: {fix}") from None


def check_resume(path: str | None, key: str = "train.resume") -> None:
    if not path:
        return
    from learner.checkpoint import resolve_checkpoint

    try:
        resolve_checkpoint(Path(path))
    except FileNotFoundError as e:
        raise PreflightError(f"key '{key}': {e}") from None


def check_file(path: str | None, key: str) -> None:
    if path and not Path(path).exists():
        raise PreflightError(f"key '{key}': no such file '{path}'")


def check_ws_url(url: str, key: str, must_listen: bool) -> None:
    """``ws://HOST:PORT[/path]`` well formed; with ``must_listen`` something answers on the port."""
    u = urlparse(url)
    if u.scheme not in ("ws", "wss") or not u.hostname:
        raise PreflightError(
            f"{key} {url!r}: expected ws://HOST:PORT (or wss://), e.g. ws://127.0.0.1:8000"
        )
    try:
        port = u.port or (443 if u.scheme == "wss" else 80)
    except ValueError:
        raise PreflightError(f"{key} {url!r}: the port is not a number") from None
    if not must_listen:
        return
    try:
        with socket.create_connection((u.hostname, port), timeout=2.0):
            pass
    except OSError:
        raise ConnectionError(
            f"{key} {url}: nothing is listening there; start the server first, e.g. "
            f"rlinf serve --checkpoint RUN --port {port}"
        ) from None


def check_streamer_token(graph: Any, only: list[str] | None = None) -> None:
    """A graph whose streamer starts needs its ingest token now, not when the node is up: the
    same read the node does (file or environment, inherited by the nodes), without the value."""
    streamer = graph.streamer
    if streamer.enabled and (only is None or streamer.name in only):
        streamer.resolved_stream()  # ConfigError naming streamer.token_file / the variable


def check_cluster(cluster: Any) -> None:
    if cluster.address:
        from learner.cluster import check_address

        check_address(cluster.address)


def _runs_elsewhere(cfg: Any) -> bool:
    """A GPU-only config (vLLM / SGLang rollout) on a machine without GPUs cannot run here: its
    placement and data paths describe the GPU box, so only the config itself is checked."""
    from learner.cluster import expected_slots

    backend = cfg.rollout.backend if type(cfg).__name__ == "ReasoningConfig" else None
    slots = expected_slots(cfg.cluster)
    if backend in GPU_ONLY_BACKENDS and slots is not None and slots[1] == "cpu":
        log.warning(
            "rollout.backend=%s needs GPUs and this machine has none: placement and data paths "
            "are not checked against this machine",
            backend,
        )
        return True
    return False


@dataclass(frozen=True)
class ListenPort:
    """A TCP port something of ours will listen on, and how a user picks another."""

    key: str  # the config key (and flag) that names it, e.g. "ingest.port"
    host: str
    port: int
    pick: str  # the fix, e.g. "ingest.port=8101 ... and the robots' streamer.stream.url"


def check_listen_port(lp: ListenPort) -> None:
    """Bind ``host:port`` the way the server will (``SO_REUSEADDR``, as asyncio / websockets do)
    and let go at once: a port another process listens on fails here, a port in TIME_WAIT does
    not. Port 0 (the system picks a free one) is always free."""
    if lp.port == 0:
        return
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(
            lp.host, lp.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(addr)
    except OSError as e:
        raise PreflightError(_port_message(lp, e)) from None


def _port_message(lp: ListenPort, e: OSError) -> str:
    if e.errno == errno.EADDRINUSE:
        why = (
            f"port {lp.port} on {lp.host} is already in use (another learner or server still "
            f"running? `ss -ltnp 'sport = :{lp.port}'` names it)"
        )
    else:
        why = f"cannot listen on {lp.host}:{lp.port} ({e.strerror or e})"
    return f"key '{lp.key}': {why}; stop it or pick another port: {lp.pick}"


def _another(port: int) -> int:
    return port + 1 if port < 65535 else port - 1


def _ingest_port(cfg: Any) -> ListenPort | None:
    ingest = getattr(cfg, "ingest", None)
    if ingest is None or not getattr(ingest, "enabled", False):
        return None
    other = _another(ingest.port)
    return ListenPort(
        "ingest.port",
        ingest.host,
        ingest.port,
        f"ingest.port={other} (0 picks a free one, written to <out_dir>/ingest.json) and "
        f"streamer.stream.url=ws://HOST:{other}/transitions on the robots",
    )


# what a runner config may listen on: each returns the port or None when the config opens none
TRAIN_LISTEN_PORTS: tuple[Callable[[Any], ListenPort | None], ...] = (_ingest_port,)


def check_train_ports(cfg: Any) -> None:
    for find in TRAIN_LISTEN_PORTS:
        lp = find(cfg)
        if lp is not None:
            check_listen_port(lp)


def serve_port(server: Any) -> ListenPort:
    """The policy server's port (``ServerConfig``), with the fix ``rlinf serve`` takes."""
    other = _another(server.port)
    return ListenPort(
        "server.port",
        server.host,
        server.port,
        f"--port {other} (or server.port={other}; 0 picks a free one) and "
        f"policy_client.server_url / push.url=ws://HOST:{other} on its clients",
    )


def previous_run(out_dir: Path) -> list[str]:
    """What a run directory already holds (sorted names; launcher files do not count)."""
    if not out_dir.is_dir():
        return []
    return sorted(p.name for p in out_dir.iterdir() if p.name not in LAUNCHER_FILES)


def check_llm_resume(train: Any) -> None:
    """An LLM run resumes from a checkpoint with its train state, before ``train.steps``."""
    if not train.resume:
        return
    from learner.checkpoint import read_meta
    from learner.llm.learner import TRAIN_STATE_FILE

    ckpt, meta = read_meta(train.resume)
    if not (ckpt / TRAIN_STATE_FILE).is_file():
        raise PreflightError(
            f"key 'train.resume': {ckpt} has no {TRAIN_STATE_FILE}, so it cannot be continued; "
            f"start a new run from its weights with model.path={ckpt}"
        )
    step = int(meta.get("iteration", 0))
    if step >= train.steps:
        raise PreflightError(
            f"key 'train.steps'={train.steps}: train.resume's checkpoint {ckpt} is at RL step "
            f"{step}; set train.steps above it to train further"
        )


def check_llm_actor_ranks(cfg: Any) -> None:
    """The LLM critic (``algorithm.adv: gae``) trains in one actor process."""
    from learner.cluster import expected_slots
    from learner.placement import is_auto, parse_placement

    slots = expected_slots(cfg.cluster)
    if not cfg.algorithm.estimator.needs_critic or cfg.train.driver != "workers" or slots is None:
        return
    if is_auto(cfg.placement):
        return
    ranks = parse_placement(dict(cfg.placement), slots[0])["actor"].num_processes
    if ranks > 1:
        raise PreflightError(
            f"key 'placement': the actor on {ranks} processes with "
            f"algorithm.adv={cfg.algorithm.adv!r}; the critic trains in one actor process: "
            "place the actor on one slot (e.g. placement.actor=1)"
        )


def check_out_dir(train: Any) -> None:
    """A non-empty ``train.out_dir`` is refused unless ``train.resume`` is set: a second run
    there would silently reuse the first one's ``initial`` actor and episode store, overwrite
    its ``metrics.json`` and leave its later checkpoints beside the new ones."""
    out = Path(train.out_dir)
    if getattr(train, "resume", None):
        return
    if out.exists() and not out.is_dir():
        raise PreflightError(f"key 'train.out_dir': {out} is a file, not a directory")
    held = previous_run(out)
    if not held:
        return
    shown = ", ".join(held[:4]) + (", ..." if len(held) > 4 else "")
    resume = "continue it with train.resume=true, " if hasattr(train, "resume") else ""
    raise PreflightError(
        f"key 'train.out_dir': {out} already holds a run ({shown}); {resume}start a fresh one "
        f"beside it with --new-run ({out}-YYYYmmdd-HHMMSS), or set another train.out_dir"
    )


def check_train(cfg: Any) -> None:
    """Every check that applies to a runner config (embodied or reasoning)."""
    kind = type(cfg).__name__
    check_cluster(cfg.cluster)
    if _runs_elsewhere(cfg):
        return
    check_train_ports(cfg)
    check_placement(cfg.placement, PLACEMENT_COMPONENTS.get(kind), cfg.cluster)
    if kind == "EmbodiedConfig":
        check_env_name(cfg.env.name)
        check_model(cfg.model.name)
        check_resume(cfg.train.resume)
    elif kind == "ReasoningConfig":
        check_resume(cfg.train.resume)
        check_llm_resume(cfg.train)
        check_llm_actor_ranks(cfg)
        data = cfg.data
        for key, path in (
            ("train_path", data.train_path),
            ("eval_path", data.eval_path),
            ("sft_path", data.sft_path),
        ):
            check_file(path, f"data.{key}")
    from learner.sections import EnvRunConfig

    if isinstance(cfg, EnvRunConfig) and cfg.eval.env:  # any runner that evaluates in a simulator
        check_env_name(cfg.eval.env, "eval.env")
