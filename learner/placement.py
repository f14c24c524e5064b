"""One placement grammar for every mode: which slots each component's processes run on.

A placement is a mapping ``{component(s): ranks}``. Ranks are slot indices (GPUs where the
cluster has them, CPU cores otherwise):

- ``all`` -- every slot, one process per slot
- ``3`` -- slot 3 (one process)
- ``0-3`` -- slots 0..3, one process per slot
- ``0,2,5`` -- a list, one process per slot
- ``0-1:0-3`` -- processes 0..1 spread evenly over slots 0..3 (2 slots per process)
- ``<ranks>@<resource>`` -- as ``<ranks>``, each process also needing one unit of a custom Ray
  resource, so it runs on the node that offers it: ``env: 1@robot:franka0`` puts the env worker
  on the robot PC that joined with ``ray start --resources '{"robot:franka0": 1}'`` (one unit
  per process: two processes never drive one arm). A fleet is the same rule: every robot PC
  offers one unit of one label (``--resources '{"fleet:env": 1}'``), and ``env: 0-2@fleet:env``
  asks for three processes of one unit each, so Ray puts one on each of three robot PCs; the
  learner takes a label only its node offers (``learner,replay: 0@learner_node``); an online
  off-policy run places its robot sites' policy servers by the same rule
  (``server: 1-2@fleet:site``)

Several components can share a key: ``"env,rollout": 0-1``. The mode follows from the sets:
identical slot sets everywhere = collocated, pairwise disjoint = disaggregated, anything else =
hybrid.

>>> p = parse_placement({"env,rollout,actor": "all"}, num_slots=4)
>>> p.mode, p["actor"].num_processes
('collocated', 4)
>>> p = parse_placement({"env": 0, "rollout": 1, "actor": "0-1"}, num_slots=2)
>>> p.mode, p["actor"].process_slots
('hybrid', [[0], [1]])
>>> parse_placement({"rollout": "0-1", "actor": "2-3"}, num_slots=4).mode
'disaggregated'
>>> parse_placement({"actor": "0-1:0-3"}, num_slots=4)["actor"].process_slots
[[0, 1], [2, 3]]
>>> parse_placement({"env": "1@robot:franka0", "rollout,actor": 0}, num_slots=2)["env"].resources
{'robot:franka0': 1.0}
>>> fleet = parse_placement({"learner,replay": "0@learner_node", "env": "1-2@fleet:env"}, 3)
>>> fleet["env"].num_processes, fleet["env"].resources, fleet["learner"].resources
(2, {'fleet:env': 1.0}, {'learner_node': 1.0})
>>> online = {"learner,replay,env": "0@learner_node", "server": "1-2@fleet:site"}
>>> parse_placement(online, 3, ["env", "learner", "replay"], optional=["server"])["server"].slots
[1, 2]
>>> parse_placement({"actor": "0-4"}, num_slots=4)
Traceback (most recent call last):
...
learner.placement.PlacementError: placement 'actor: 0-4': slot 4 out of range; the cluster has 4
slots (0-3)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from rlinf_contracts.config.errors import ConfigError

Mode = Literal["collocated", "disaggregated", "hybrid"]


class PlacementError(ConfigError):
    """A placement that cannot be parsed or realised; the message quotes the offending entry."""


AUTO = "auto"
"""The one word a config may give instead of a mapping: the placement the cost model predicts
fastest, chosen by the planning step (``learner.scheduling.auto.plan``) after validation."""


def is_auto(placement: object) -> bool:
    return isinstance(placement, str) and placement.strip() == AUTO


def check_placement_value(placement: object) -> None:
    """A placement is a mapping or the word ``auto`` -- the well-formedness a config's
    ``validate`` checks; nothing is profiled or resolved here."""
    if isinstance(placement, str) and not is_auto(placement):
        raise ConfigError(
            f"key 'placement' is a mapping of components to slots or 'auto', got {placement!r}"
        )


@dataclass(frozen=True)
class ComponentPlacement:
    """Where one component runs: ``process_slots[r]`` are the slots of process rank ``r``."""

    component: str
    process_slots: list[list[int]]
    resources: dict[str, float] = field(
        default_factory=dict
    )  # per process, e.g. {"robot:franka0": 1}

    @property
    def num_processes(self) -> int:
        return len(self.process_slots)

    @property
    def slots(self) -> list[int]:
        return sorted({s for ps in self.process_slots for s in ps})

    @property
    def slots_per_process(self) -> int:
        return len(self.process_slots[0])


@dataclass(frozen=True)
class Placement:
    components: dict[str, ComponentPlacement]
    num_slots: int
    mode: Mode = field(default="collocated")

    def __getitem__(self, component: str) -> ComponentPlacement:
        if component not in self.components:
            raise PlacementError(
                f"component '{component}' has no placement; placed: {', '.join(self.components)}"
            )
        return self.components[component]

    def __contains__(self, component: object) -> bool:
        return component in self.components

    def shares_slots(self, a: str, b: str) -> bool:
        return bool(set(self[a].slots) & set(self[b].slots))

    def describe(self) -> str:
        parts = [
            f"{c}: {p.num_processes} proc on slots {_fmt(p.slots)}"
            + "".join(f" @{r}" for r in p.resources)
            for c, p in self.components.items()
        ]
        return f"{self.mode} ({'; '.join(parts)})"


def _fmt(slots: list[int]) -> str:
    if slots and slots == list(range(slots[0], slots[-1] + 1)) and len(slots) > 1:
        return f"{slots[0]}-{slots[-1]}"
    return ",".join(map(str, slots))


def _parse_ranks(text: str, where: str) -> list[int]:
    """``3`` / ``0-3`` / ``0,2,5`` (and mixes like ``0-1,4``) -> sorted unique list."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise PlacementError(f"placement '{where}': empty rank in '{text}'")
        lo_s, sep, hi_s = part.partition("-")
        try:
            lo = int(lo_s)
            hi = int(hi_s) if sep else lo
        except ValueError:
            raise PlacementError(
                f"placement '{where}': cannot parse '{part}'; use all, N, A-B, A,B,C or A-B:C-D"
            ) from None
        if lo < 0 or hi < lo:
            raise PlacementError(f"placement '{where}': empty or negative range '{part}'")
        out.extend(range(lo, hi + 1))
    dups = sorted({r for r in out if out.count(r) > 1})
    if dups:
        raise PlacementError(f"placement '{where}': duplicate rank(s) {dups}")
    return out


def _check_range(slots: Iterable[int], num_slots: int, where: str) -> None:
    for s in slots:
        if s >= num_slots:
            raise PlacementError(
                f"placement '{where}': slot {s} out of range; the cluster has {num_slots} slots "
                f"(0-{num_slots - 1})"
            )


def _parse_value(value: str | int, num_slots: int, where: str) -> list[list[int]]:
    text = str(value).strip()
    if text == "all":
        return [[s] for s in range(num_slots)]
    if ":" in text:
        procs_text, _, slots_text = text.partition(":")
        procs = _parse_ranks(procs_text, where)
        slots = _parse_ranks(slots_text, where)
        _check_range(slots, num_slots, where)
        if procs != list(range(len(procs))):
            raise PlacementError(
                f"placement '{where}': process ranks must be 0..N-1, got '{procs_text}'"
            )
        if len(slots) % len(procs):
            raise PlacementError(
                f"placement '{where}': {len(slots)} slots cannot be split evenly over {len(procs)} "
                "processes"
            )
        per = len(slots) // len(procs)
        return [slots[i * per : (i + 1) * per] for i in range(len(procs))]
    slots = _parse_ranks(text, where)
    _check_range(slots, num_slots, where)
    return [[s] for s in slots]


def _parse_resource(value: str | int, where: str) -> tuple[str, dict[str, float]]:
    """``"1@robot:franka0"`` -> (``"1"``, ``{"robot:franka0": 1.0}``); no ``@`` -> no resources."""
    text, at, resource = str(value).strip().partition("@")
    if not at:
        return text, {}
    resource = resource.strip()
    if not resource or any(c.isspace() or c in "@," for c in resource):
        raise PlacementError(
            f"placement '{where}': bad resource name after '@' ({resource!r}); "
            "e.g. env: 1@robot:franka0"
        )
    return text.strip(), {resource: 1.0}


def _check_pinned(placed: dict[str, ComponentPlacement]) -> None:
    """A resource-pinned component must have its own processes: sharing every slot with another
    component would let the runner fuse them into one process, off the pinned node."""
    for name, p in placed.items():
        for other, q in placed.items():
            if other != name and p.resources != q.resources and p.process_slots == q.process_slots:
                pin = ", ".join(p.resources or q.resources)
                raise PlacementError(
                    f"placement: '{name}' and '{other}' have the same slots but only one is pinned "
                    f"to {pin}; give the pinned one its own slots (e.g. env: 1@{pin})"
                )


def classify(components: dict[str, ComponentPlacement]) -> Mode:
    sets = [frozenset(p.slots) for p in components.values()]
    if len(set(sets)) == 1:
        return "collocated"
    if all(not (a & b) for i, a in enumerate(sets) for b in sets[i + 1 :]):
        return "disaggregated"
    return "hybrid"


def parse_placement(
    spec: dict[str, str | int],
    num_slots: int,
    components: list[str] | None = None,
    optional: Iterable[str] = (),
) -> Placement:
    """Parse ``spec`` against a cluster of ``num_slots``; ``components`` lists the valid names
    (all of which must be placed) when the caller knows them, ``optional`` names that are valid
    but may be left out (a run that places them starts them, e.g. off-policy ``server``)."""
    if is_auto(spec):
        raise PlacementError(
            "placement 'auto' is chosen by the planning step before a run starts "
            "(learner.scheduling.auto.plan; `rlinf train` runs it)"
        )
    if num_slots < 1:
        raise PlacementError("the cluster has no slots to place components on")
    if not spec:
        raise PlacementError("placement is empty; e.g. {'env,rollout,actor': 'all'}")
    known = None if components is None else [*components, *optional]
    placed: dict[str, ComponentPlacement] = {}
    for key, value in spec.items():
        names = [n.strip() for n in str(key).split(",")]
        for name in names:
            where = f"{key}: {value}"
            if not name:
                raise PlacementError(f"placement '{where}': empty component name")
            if known is not None and name not in known:
                near = difflib.get_close_matches(name, known, n=1)
                hint = f" Did you mean '{near[0]}'?" if near else ""
                raise PlacementError(
                    f"placement '{where}': unknown component '{name}'; known: "
                    f"{', '.join(known)}.{hint}"
                )
            if name in placed:
                raise PlacementError(f"placement '{where}': component '{name}' is placed twice")
            ranks, resources = _parse_resource(value, where)
            placed[name] = ComponentPlacement(
                name, _parse_value(ranks, num_slots, where), resources
            )
    if components is not None:
        missing = [c for c in components if c not in placed]
        if missing:
            raise PlacementError(f"placement is missing component(s): {', '.join(missing)}")
    _check_pinned(placed)
    return Placement(placed, num_slots, classify(placed))
