"""``rlinf convert SRC DST``: episodes between ROS 2 bags, the episode store and LeRobot v3.

    rlinf convert recording.mcap runs/demos/pick --topics bag_topics.yaml --spec robot.yaml
    rlinf convert runs/demos/pick runs/demos/pick.mcap
    rlinf convert recording.mcap runs/lerobot/pick --to lerobot

Why one command over registries: every format is a reader (episodes out of a path) and a
writer (episodes into one), so any pair converts through the episode schema and a new format
is one entry in :data:`FORMATS`, not a case per pair. The format of SRC is read from what is
there (a ``.mcap`` file or rosbag2 folder, a store's ``zarr.json``, LeRobot's
``meta/info.json``); DST's from ``--to``, else its extension (``.mcap``) or what already
exists there, else a new episode store. Mistakes (an unknown topic, a bag that does not fit
the spec, a missing file) end as one line naming the topic or flag, with the bag's topics.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlinf_contracts.config import ConfigError
from rlinf_contracts.registry import Registry

log = logging.getLogger(__name__)


@dataclass
class Options:
    """What the flags say about both sides."""

    topics: Any  # rlinf_data.bags.TopicMap (imported in run: mcap loads only when used)
    spec: Any = None  # rlinf_contracts.spec.RobotSpec | None


@dataclass
class Result:
    """What a writer reports for the summary line."""

    episodes: int = 0
    steps: int = 0
    skipped: int = 0
    detail: str = ""


@dataclass(frozen=True)
class Format:
    """One episode container: how to recognise it, read episodes from it (count, lazy
    episodes), and write episodes into it (``tick`` after each)."""

    detect: Callable[[Path], bool]
    read: Callable[[Path, Options], tuple[int, Iterable[Any]]]
    write: Callable[[Iterable[Any], Path, Options, Callable[[], None]], Result]
    new_ok: Callable[[Path], str] = field(default=lambda p: "")  # why DST cannot be written


def _is_bag(p: Path) -> bool:
    return (p.is_file() and p.suffix == ".mcap") or (p / "metadata.yaml").is_file()


def _read_bag(p: Path, o: Options) -> tuple[int, Iterable[Any]]:
    from rlinf_data.bags import open_bag

    bag = open_bag(p, o.topics, o.spec)
    return len(bag), bag


def _write_bag(eps: Iterable[Any], p: Path, o: Options, tick: Callable[[], None]) -> Result:
    from rlinf_data.bags import write_bag

    s = write_bag(eps, p, o.topics, progress=lambda ep: tick())
    return Result(
        s.episodes, s.steps, s.skipped, f"{s.messages} messages on {len(s.topics)} topics"
    )


def _bag_target(p: Path) -> str:
    if p.suffix != ".mcap":
        return f"an MCAP bag is written to a .mcap file; {p} is not one"
    return f"{p} exists; remove it or name another file" if p.exists() else ""


def _read_store(p: Path, o: Options) -> tuple[int, Iterable[Any]]:
    from rlinf_data.store import EpisodeStore

    store = EpisodeStore(p, mode="r")
    return len(store), store


def _write_store(eps: Iterable[Any], p: Path, o: Options, tick: Callable[[], None]) -> Result:
    from rlinf_data.store import EpisodeStore

    store, out = None, Result()
    for ep in eps:
        if len(ep):
            store = store or EpisodeStore(p)  # created with the first episode, not before
            store.write(ep)
            out.episodes, out.steps = out.episodes + 1, out.steps + len(ep)
        else:
            out.skipped += 1
        tick()
    return out


def _read_lerobot(p: Path, o: Options) -> tuple[int, Iterable[Any]]:
    from rlinf_data.lerobot import import_lerobot

    try:
        eps = import_lerobot(p)
    except KeyError as e:  # a foreign dataset without a feature we read
        raise ConfigError(f"the LeRobot dataset at {p} has no {e.args[0]!r}") from None
    return len(eps), eps


def _write_lerobot(eps: Iterable[Any], p: Path, o: Options, tick: Callable[[], None]) -> Result:
    from rlinf_data.lerobot import export_lerobot

    def counted() -> Iterator[Any]:
        for ep in eps:
            yield ep
            tick()

    kept = list(counted())
    export_lerobot(kept, p)
    return Result(len(kept), sum(len(ep) for ep in kept))


def _dir_target(p: Path) -> str:
    if p.exists() and (not p.is_dir() or any(p.iterdir())):
        return f"{p} exists and is not an empty directory; name a new one"
    return ""


FORMATS: Registry[Format] = Registry("episode format")
FORMATS.add("mcap", Format(_is_bag, _read_bag, _write_bag, _bag_target))
FORMATS.add("store", Format(lambda p: (p / "zarr.json").is_file(), _read_store, _write_store))
FORMATS.add(
    "lerobot",
    Format(lambda p: (p / "meta/info.json").is_file(), _read_lerobot, _write_lerobot, _dir_target),
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "convert",
        help="convert episodes between ROS 2 bags (.mcap), episode stores and LeRobot v3",
    )
    p.add_argument("src", help="a .mcap file or rosbag2 folder, an episode store, a LeRobot v3 dir")
    p.add_argument("dst", help="a .mcap file, an episode store (new or existing), a LeRobot dir")
    p.add_argument("--to", choices=FORMATS.names(), help="DST format (default: from DST)")
    p.add_argument(
        "--topics", help="topic map YAML: which bag topic is state / action / camera / events"
    )
    p.add_argument(
        "--spec", help="robot spec YAML (as `rlinf spec` prints): rate, sizes, stored per episode"
    )
    p.set_defaults(run=run)


def source_format(src: Path) -> str:
    if not src.exists():
        raise FileNotFoundError(f"no such file or directory: {src}")
    kind = next((k for k in FORMATS if FORMATS.get(k).detect(src)), None)
    if kind is None:
        raise ConfigError(
            f"{src} is no episode container: not a .mcap file or rosbag2 folder "
            "(metadata.yaml), episode store (zarr.json) or LeRobot dataset (meta/info.json)"
        )
    return kind


def target_format(dst: Path, to: str | None) -> str:
    if to:
        return to
    if dst.suffix == ".mcap":
        return "mcap"
    existing = [k for k in FORMATS if dst.exists() and FORMATS.get(k).detect(dst)]
    return existing[0] if existing else "store"


def load_spec(path: str | None) -> Any:
    """The robot spec in YAML file ``path``: a spec map, or one under ``robot_spec`` (as a
    graph YAML's ``policy_client.robot_spec``)."""
    if path is None:
        return None
    import yaml

    from rlinf_contracts.spec import RobotSpec

    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"--spec: no such file {path}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"--spec {path} is not valid YAML: {e}") from None
    for key in ("policy_client", "robot_spec"):
        if isinstance(data, dict) and isinstance(data.get(key), dict):
            data = data[key]
    return RobotSpec.from_dict(data)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from rlinf_contracts.episode import EpisodeError

    try:
        from rlinf_data.bags import load_topic_map
    except ImportError as e:  # mcap / mcap-ros2-support come with the robot extra
        raise ConfigError(f"rlinf convert needs {e.name} (pip install 'rlinf-ros[robot]')") from e
    src, dst = Path(args.src), Path(args.dst)
    src_kind, dst_kind = source_format(src), target_format(dst, args.to)
    if src.resolve() == dst.resolve():
        raise ConfigError(f"SRC and DST are the same path: {src}")
    why = FORMATS.get(dst_kind).new_ok(dst)
    if why:
        raise ConfigError(why)
    opts = Options(load_topic_map(args.topics), load_spec(args.spec))
    try:
        total, episodes = FORMATS.get(src_kind).read(src, opts)
        with tqdm(total=total, unit="ep", desc=f"convert {src_kind} -> {dst_kind}") as bar:

            def tick() -> None:
                bar.update(1)

            result = FORMATS.get(dst_kind).write(episodes, dst, opts, tick)
    except EpisodeError as e:
        raise ConfigError(f"{src}: {e}") from None
    skipped = getattr(episodes, "skipped", 0) + result.skipped
    print(
        f"rlinf convert: {result.episodes} episodes, {result.steps} steps: {src} ({src_kind}) "
        f"-> {dst} ({dst_kind})"
        + (f"; {result.detail}" if result.detail else "")
        + (f"; skipped {skipped} without a step" if skipped else "")
    )
    return 0 if result.episodes else 1
