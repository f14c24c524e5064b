"""Every bridge that runs here passes the whole vector-env conformance suite (the slow bridges'
longer checks in the slow tier, ``make test-slow``)."""

from __future__ import annotations

import pytest

from tests.sim_bridges.bridges import BRIDGES, QUICK_CHECKS, SLOW
from tests.sim_bridges.conformance import CHECKS

pytestmark = pytest.mark.sim

CASES = [
    pytest.param(b, c, marks=pytest.mark.slow) if b in SLOW and c not in QUICK_CHECKS else (b, c)
    for b in sorted(BRIDGES)
    for c in sorted(CHECKS)
]


@pytest.mark.parametrize("bridge, check", CASES)
def test_conformance(bridge: str, check: str) -> None:
    CHECKS[check](BRIDGES[bridge])
