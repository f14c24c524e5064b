"""Imports only point down: the rooms of docs/architecture.md, checked on every module's AST.

Why an AST walk and not importing: it sees imports inside functions too (a lazy upward import
is still an upward import), needs no optional dependency installed, and runs in well under a
second. The same rules are the table in docs/architecture.md; a test below checks the two agree.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# room -> rooms it may import (besides itself). Top to bottom: cli; learner | rlinf_ros;
# policy_server; robot_drivers; sim_bridges; rlinf_contracts.
ALLOWED: dict[str, set[str]] = {
    "rlinf_contracts": set(),
    "rlinf_data": {"rlinf_contracts"},
    "sim_bridges": {"rlinf_contracts"},
    "robot_drivers": {
        "rlinf_contracts",
        "sim_bridges",
    },  # the simulated arm reuses the MuJoCo scene
    "policy_server": {"rlinf_contracts"},
    "rlinf_ros": {"rlinf_contracts", "rlinf_data", "robot_drivers", "sim_bridges", "policy_server"},
    "learner": {"rlinf_contracts", "rlinf_data", "sim_bridges"},
    "rlinf_cli": {
        "rlinf_contracts",
        "rlinf_data",
        "sim_bridges",
        "robot_drivers",
        "policy_server",
        "rlinf_ros",
        "learner",
    },
}
# third-party packages a room must never import: the robot PC installs no torch and no Ray, and
# the contracts stay numpy + msgpack + YAML
FORBIDDEN_THIRD_PARTY: dict[str, set[str]] = {
    "rlinf_contracts": {"torch", "ray", "mujoco", "rclpy", "websockets", "transformers"},
    "rlinf_data": {"torch", "ray", "rclpy"},
    "policy_server": {"torch", "ray", "rclpy"},
    "rlinf_ros": {"torch", "ray"},
    "robot_drivers": {"torch", "ray"},
}


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import statement in ``path``, at any depth."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def violations(root: Path) -> list[str]:
    """Every import in ``root``'s rooms that breaks :data:`ALLOWED` or :data:`FORBIDDEN_THIRD_PARTY`."""
    found = []
    for room, allowed in ALLOWED.items():
        for path in sorted((root / room).rglob("*.py")):
            for line, module in imports_of(path):
                top = module.split(".")[0]
                where = f"{path.relative_to(root)}:{line}"
                if top in ALLOWED and top != room and top not in allowed:
                    found.append(
                        f"{where}: {room} imports {module} (may import: {sorted(allowed) or 'nothing'})"
                    )
                if top in FORBIDDEN_THIRD_PARTY.get(room, ()):
                    found.append(
                        f"{where}: {room} imports {module}, which a robot-PC install does not have"
                    )
    return found


def test_imports_only_point_down() -> None:
    assert violations(ROOT) == []


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    """The check itself can fail: a planted upward import (even inside a function) is reported."""
    for room in ALLOWED:
        (tmp_path / room).mkdir()
    (tmp_path / "policy_server" / "server.py").write_text(
        "def f():\n    from learner.models import Policy\n"
    )
    (tmp_path / "rlinf_contracts" / "spec.py").write_text("import torch\n")
    (tmp_path / "learner" / "ok.py").write_text("from rlinf_contracts.spec import RobotSpec\n")
    found = sorted(violations(tmp_path))
    assert len(found) == 2
    assert found[0].startswith("policy_server/server.py:2: policy_server imports learner.models")
    assert found[1].startswith("rlinf_contracts/spec.py:1: rlinf_contracts imports torch")


def test_architecture_doc_states_the_same_rules() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for room, allowed in ALLOWED.items():
        row = re.search(rf"^\| `{room}/?` \|[^|]*\|([^|]*)\|", doc, re.M)
        assert row is not None, f"docs/architecture.md has no row for room {room}"
        named = set(re.findall(r"`(\w+)`", row.group(1)))
        assert named == allowed, (
            f"docs/architecture.md says {room} may import {sorted(named)}; the rule is {sorted(allowed)}"
        )


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_every_room_is_a_package(room: str) -> None:
    assert (ROOT / room / "__init__.py").is_file()
