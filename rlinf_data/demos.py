"""The one demo reader: the episodes a runner learns from, out of an episode store or LeRobot.

Why one reader: offline BC / IQL / DAgger (``data.demos``), RLPD's demo half (``train.demos``)
and a restart's replay refill (the run's own store), the reward classifier (``data.store``) and
VLA SFT (``sft.demos``) all learn from recorded episodes. Reading them here gives every runner
the same source kinds, the same skipped episodes and the same errors; a runner keeps only the
few lines that turn :class:`~rlinf_contracts.episode.Episode` into its own batch.

- Source kind: a registry (:data:`DEMO_FORMATS`); each kind is recognised by the file that marks
  its root (``zarr.json``: an :class:`~rlinf_data.store.EpisodeStore`; ``meta/info.json``: a
  LeRobot v3.0 dataset, :func:`~rlinf_data.lerobot.import_lerobot`). A new kind is one ``add``.
- Skipped: episodes without a step -- torn by a kill (the store reads them as empty and
  ``aborted``, without a layout) or ended before their first step: they hold no transition.
  ``sources`` keeps only the episodes recorded as those sources (a refill takes robot episodes).
- Errors (:class:`DemoError`, a ``ConfigError`` naming the config key): a path that is no demo
  source, a source without any episode left, and an episode without a feature the runner needs
  (a step field such as ``images/wrist``, or :data:`EPISODE_FEATURES`), naming that feature.

>>> open_demos("/no/such/dir", key="data.demos")
Traceback (most recent call last):
...
rlinf_data.demos.DemoError: key 'data.demos': no demos at /no/such/dir: ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from rlinf_contracts.config import ConfigError
from rlinf_contracts.episode import Episode, EpisodeError
from rlinf_contracts.registry import Registry

__all__ = [
    "DEMO_FORMATS",
    "EPISODE_FEATURES",
    "DemoError",
    "DemoFormat",
    "Demos",
    "demo_kind",
    "open_demos",
]
RECORD_HINT = "record demos with 'rlinf collect ENV --out DIR'"


class DemoError(ConfigError):
    """Demos a run cannot learn from; the message names the config key and what is missing."""


@dataclass(frozen=True)
class DemoFormat:
    """One kind of demo source: the file that marks its root and how its episodes are read
    (lazily where the format allows, so a large store is never held twice in memory)."""

    marker: str
    read: Callable[[Path], Iterable[Episode]]


def _read_store(path: Path) -> Iterator[Episode]:
    from rlinf_data.store import EpisodeStore

    yield from EpisodeStore(path, mode="r")


def _read_lerobot(path: Path) -> Iterable[Episode]:
    from rlinf_data.lerobot import import_lerobot  # pyarrow and PyAV: imported where used

    try:
        return import_lerobot(path)
    except KeyError as e:  # a foreign dataset without a feature or column we read
        raise EpisodeError(f"the LeRobot dataset at {path} has no {e.args[0]!r}") from None


DEMO_FORMATS: Registry[DemoFormat] = Registry("demo source")
DEMO_FORMATS.add("episode_store", DemoFormat("zarr.json", _read_store))
DEMO_FORMATS.add("lerobot", DemoFormat("meta/info.json", _read_lerobot))

# features an episode has beyond its step fields: name -> whether this episode has it
EPISODE_FEATURES: dict[str, Callable[[Episode], bool]] = {
    "instruction": lambda ep: bool(ep.info.instruction),
    "camera": lambda ep: bool(ep.info.layout.cameras),
    "final": lambda ep: ep.final is not None,
}


def demo_kind(path: str | Path) -> str | None:
    """The registered kind whose marker file is under ``path``; None when there is none."""
    root = Path(path)
    return next((k for k in DEMO_FORMATS if (root / DEMO_FORMATS.get(k).marker).is_file()), None)


def _has(ep: Episode, feature: str) -> bool:
    return EPISODE_FEATURES.get(feature, lambda e: feature in e.steps)(ep)


@dataclass(frozen=True)
class Demos:
    """An opened demo source. Iterating it yields the episodes to learn from, lazily (stepless
    ones skipped, each checked for ``need``); :meth:`each` and :meth:`episodes` also refuse a
    source without any."""

    path: Path
    kind: str
    key: str  # the config key that named ``path``: every error starts with it
    need: tuple[str, ...] = ()  # step fields or EPISODE_FEATURES every episode must have
    sources: tuple[str, ...] | None = None  # keep only these EpisodeInfo.source values
    hint: str = ""  # how to record demos that have ``need`` (appended to a missing-feature error)

    def __iter__(self) -> Iterator[Episode]:
        try:
            for i, ep in enumerate(DEMO_FORMATS.get(self.kind).read(self.path)):
                if not len(ep) or (self.sources is not None and ep.info.source not in self.sources):
                    continue
                self._check(i, ep)
                yield ep
        except EpisodeError as e:  # not a store after all, a LeRobot version we do not read...
            raise DemoError(f"key {self.key!r}: {e}") from None

    def _check(self, i: int, ep: Episode) -> None:
        missing = [f for f in self.need if not _has(ep, f)]
        if missing:
            has = sorted(ep.steps) + [f for f in EPISODE_FEATURES if _has(ep, f)]
            raise DemoError(
                f"key {self.key!r}: episode {i} of {self.path} has no {missing[0]!r} "
                f"(it has {has}){'; ' + self.hint if self.hint else ''}"
            )

    def each(self) -> Iterator[Episode]:
        """As iterating, but a source that yields no episode at all is an error at its end."""
        n = 0
        for ep in self:
            n += 1
            yield ep
        if not n:
            only = f" from {'/'.join(self.sources)}" if self.sources is not None else ""
            raise DemoError(
                f"key {self.key!r}: the {self.kind} at {self.path} holds no episode with a "
                f"step{only}; {RECORD_HINT}"
            )

    def episodes(self, limit: int | None = None) -> list[Episode]:
        """The first ``limit`` episodes (all when None), in memory; none at all is an error."""
        return list(islice(self.each(), limit))


def open_demos(
    path: str | Path,
    key: str,
    need: Sequence[str] = (),
    sources: Sequence[str] | None = None,
    hint: str = "",
) -> Demos:
    """Open the demo source at ``path`` (its kind from the files there); ``key`` is the config
    key that named it. Raises :class:`DemoError` when ``path`` holds no registered kind."""
    kind = demo_kind(path)
    if kind is None:
        markers = ", ".join(f"{k} ({DEMO_FORMATS.get(k).marker})" for k in DEMO_FORMATS)
        raise DemoError(f"key {key!r}: no demos at {path}: none of {markers}; {RECORD_HINT}")
    return Demos(
        Path(path), kind, key, tuple(need), tuple(sources) if sources is not None else None, hint
    )
