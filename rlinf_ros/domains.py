"""ROS 2 domain ids that no DDS participant on this host is using right now.

Why: two graphs on one host in the same ``ROS_DOMAIN_ID`` hear each other -- two robot nodes
publishing ``/clock``, two task nodes publishing goals -- and neither fails loudly: episodes just
go wrong. A random id alone collides once in a while when several graphs (test runs,
benchmarks, twins of a fleet) start side by side. A DDS participant of domain ``d`` binds its
UDP ports in the RTPS block ``7400 + 250 * d`` .. ``+ 249`` (the well-known port mapping; Fast
DDS and Cyclone alike), so a domain whose block has no bound socket in this network namespace
has nobody in it. The check and the first participant's bind are not atomic: two pickers that
race can still meet, which a random draw over the free ids makes rare.

>>> rtps_port_block(0), rtps_port_block(232)
(range(7400, 7650), range(65400, 65650))
"""

from __future__ import annotations

import random
from pathlib import Path

PORT_BASE, DOMAIN_GAIN = 7400, 250
MAX_DOMAIN = 232  # the last id whose port block fits below 65536 (ROS 2's documented limit)
_UDP_TABLES = ("/proc/net/udp", "/proc/net/udp6")


def rtps_port_block(domain: int) -> range:
    """The UDP ports a participant of ``domain`` may bind."""
    start = PORT_BASE + DOMAIN_GAIN * domain
    return range(start, start + DOMAIN_GAIN)


def bound_udp_ports(tables: tuple[str, ...] = _UDP_TABLES) -> set[int]:
    """Local ports of the UDP sockets open in this network namespace (empty where ``/proc`` has
    no tables, e.g. off Linux: then every domain looks free)."""
    ports: set[int] = set()
    for table in tables:
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 1 and ":" in fields[1]:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def domains_in_use(ports: set[int] | None = None) -> set[int]:
    """Domain ids with at least one bound port in their RTPS block."""
    ports = bound_udp_ports() if ports is None else ports
    return {
        (p - PORT_BASE) // DOMAIN_GAIN
        for p in ports
        if PORT_BASE <= p < PORT_BASE + DOMAIN_GAIN * (MAX_DOMAIN + 1)
    }


def free_domains(
    count: int = 1, low: int = 1, high: int = MAX_DOMAIN, rng: random.Random | None = None
) -> list[int]:
    """``count`` consecutive free domain ids (a fleet of twins: one domain per robot), the run
    drawn at random from ``low`` .. ``high``; raises ``RuntimeError`` when no such run is free.

    >>> d = free_domains(3, rng=random.Random(0))
    >>> len(d) == 3 and d == list(range(d[0], d[0] + 3)) and 1 <= d[0] <= MAX_DOMAIN - 2
    True
    """
    if count < 1 or not 0 <= low <= high <= MAX_DOMAIN:
        raise ValueError(f"count >= 1 and 0 <= low <= high <= {MAX_DOMAIN} required")
    used = domains_in_use()
    starts = [
        d for d in range(low, high - count + 2) if not any(d + i in used for i in range(count))
    ]
    if not starts:
        raise RuntimeError(
            f"no {count} consecutive free ROS domain ids in {low}..{high}: "
            f"{len(used)} domains have DDS participants on this host"
        )
    start = (rng or random.Random()).choice(starts)
    return list(range(start, start + count))
