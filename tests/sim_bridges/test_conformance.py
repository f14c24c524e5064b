"""Every bridge that runs here passes the whole vector-env conformance suite."""

from __future__ import annotations

import pytest

from tests.sim_bridges.bridges import BRIDGES, SLOW
from tests.sim_bridges.conformance import CHECKS

pytestmark = pytest.mark.sim


@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize(
    "bridge", [pytest.param(b, marks=pytest.mark.slow) if b in SLOW else b for b in sorted(BRIDGES)]
)
def test_conformance(bridge: str, check: str) -> None:
    CHECKS[check](BRIDGES[bridge])
