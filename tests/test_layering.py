"""Imports only point down: the rooms of docs/architecture.md, checked on every module's AST.

Why an AST walk and not importing: it sees imports inside functions too (a lazy upward import
is still an upward import), needs no optional dependency installed, and runs in well under a
second. The same rules are the table in docs/architecture.md; a test below checks the two agree.

The same walk builds the module-level import graph of the product, which must have no cycle
(strongly connected components of more than one module): a cycle means two modules can only be
understood -- and imported -- together, and a lazy import inside a function that closes one is
still a cycle (it only moves the failure to run time), so imports at any depth count. An edge
goes to the module a statement names (``import a.b.c`` -> ``a.b.c``; ``from a.b import c`` ->
``a.b.c`` when that is a module, else ``a.b``; relative imports resolved); the parent packages
whose ``__init__`` Python runs on the way are not edges, so a package that re-exports its
submodules does not tie every importer of one submodule to all the others. Imports under
``if TYPE_CHECKING:`` are not edges either: they never run, and an annotation naming a class of
the module that calls this one is how a callee types its argument without importing its caller.
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
    """Every import in ``root``'s rooms that breaks :data:`ALLOWED` or
    :data:`FORBIDDEN_THIRD_PARTY`."""
    found = []
    for room, allowed in ALLOWED.items():
        for path in sorted((root / room).rglob("*.py")):
            for line, module in imports_of(path):
                top = module.split(".")[0]
                where = f"{path.relative_to(root)}:{line}"
                if top in ALLOWED and top != room and top not in allowed:
                    may = sorted(allowed) or "nothing"
                    found.append(f"{where}: {room} imports {module} (may import: {may})")
                if top in FORBIDDEN_THIRD_PARTY.get(room, ()):
                    found.append(
                        f"{where}: {room} imports {module}, which a robot-PC install does not have"
                    )
    return found


def module_name(root: Path, path: Path) -> str:
    """``learner/scheduling/auto.py`` -> ``learner.scheduling.auto``; a package: its
    ``__init__``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _named_modules(node: ast.AST, here: str, is_package: bool, modules: set[str]) -> list[str]:
    """The product modules an import statement names (see the module docstring)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = here.split(".") if is_package else here.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([node.module] if node.module else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
    else:
        return []
    out = []
    for name in names:
        while name and name not in modules:  # ``import a.b.Name``-style leftovers -> their module
            name = name.rpartition(".")[0]
        if name and name != here:
            out.append(name)
    return out


def _run_time_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` blocks."""
    out, todo = [], [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo += node.orelse
            continue
        todo += ast.iter_child_nodes(node)
    return out


def module_graph(root: Path) -> dict[str, dict[str, str]]:
    """module -> {imported product module: ``path:line`` of the first import}, at any depth."""
    files = {
        module_name(root, path): path
        for room in ALLOWED
        for path in sorted((root / room).rglob("*.py"))
    }
    graph: dict[str, dict[str, str]] = {}
    for here, path in files.items():
        edges = graph.setdefault(here, {})
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in sorted(_run_time_nodes(tree), key=lambda n: getattr(n, "lineno", 0)):
            for target in _named_modules(node, here, path.name == "__init__.py", set(files)):
                edges.setdefault(target, f"{path.relative_to(root)}:{node.lineno}")
    return graph


def import_cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, each sorted (Tarjan, iterative:
    no recursion limit on a deep import chain)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, {})))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        cycles.append(sorted(component))
    return sorted(cycles)


def describe(graph: dict[str, dict[str, str]], cycle: list[str]) -> str:
    """A cycle's modules and the imports inside it, so the failure says what to move."""
    inside = set(cycle)
    edges = [
        f"    {where}: {module} -> {target}"
        for module in cycle
        for target, where in sorted(graph[module].items())
        if target in inside
    ]
    return f"{len(cycle)} modules in a cycle: {', '.join(cycle)}\n" + "\n".join(edges)


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


def test_no_module_import_cycle() -> None:
    graph = module_graph(ROOT)
    cycles = import_cycles(graph)
    assert cycles == [], "\n".join(describe(graph, c) for c in cycles)


def test_a_planted_cycle_is_caught(tmp_path: Path) -> None:
    """The cycle check can fail: a three-module cycle closed by a lazy relative import inside a
    function is found, with its modules; a diamond (two paths, no way back) is not a cycle, nor
    is an annotation-only import back (``if TYPE_CHECKING:``)."""
    for room in ALLOWED:
        (tmp_path / room).mkdir()
        (tmp_path / room / "__init__.py").write_text("")
    sched = tmp_path / "learner" / "scheduling"
    sched.mkdir()
    (sched / "__init__.py").write_text("")
    (sched / "auto.py").write_text("import learner.runners_config\n")
    (tmp_path / "learner" / "runners_config.py").write_text(
        "from learner import topology\nfrom learner.cluster import Cluster\n"
    )
    (tmp_path / "learner" / "topology.py").write_text(
        "def resolve():\n    from .scheduling.auto import resolve\n"
    )
    (tmp_path / "learner" / "cluster.py").write_text("from learner.placement import parse\n")
    (tmp_path / "learner" / "placement.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from learner.eval import Run\n"
    )
    (tmp_path / "learner" / "eval.py").write_text(
        "from learner.cluster import Cluster\nfrom learner.placement import parse\n"
    )
    graph = module_graph(tmp_path)
    assert import_cycles(graph) == [
        ["learner.runners_config", "learner.scheduling.auto", "learner.topology"]
    ]
    assert "learner/topology.py:2: learner.topology -> learner.scheduling.auto" in describe(
        graph, import_cycles(graph)[0]
    )


def test_both_checks_fail_on_a_copy_of_the_product_with_one_planted_edge_each(
    tmp_path: Path,
) -> None:
    """On a copy of the real rooms, one planted upward import and one planted back edge are
    reported -- on top of whatever the real tree reports (nothing, when the test above passes),
    so the clean result on the real tree is not a blind check."""
    before = set(violations(ROOT)), import_cycles(module_graph(ROOT))
    for room in ALLOWED:
        for path in (ROOT / room).rglob("*.py"):
            copy = tmp_path / path.relative_to(ROOT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(path.read_text())
    errors = tmp_path / "rlinf_contracts" / "config" / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef _late():\n    import rlinf_contracts.config\n")
    policy_loop = tmp_path / "rlinf_ros" / "policy_loop.py"
    policy_loop.write_text(policy_loop.read_text() + "\n\ndef _up():\n    import learner.weights\n")
    new_violations = set(violations(tmp_path)) - before[0]
    assert [v.split(":")[0] for v in new_violations] == ["rlinf_ros/policy_loop.py"]
    planted = "rlinf_contracts.config.errors"
    assert not any(planted in c for c in before[1])
    new_cycles = [c for c in import_cycles(module_graph(tmp_path)) if planted in c]
    assert len(new_cycles) == 1 and "rlinf_contracts.config" in new_cycles[0]


def test_architecture_doc_states_the_same_rules() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for room, allowed in ALLOWED.items():
        row = re.search(rf"^\| `{room}/?` \|[^|]*\|([^|]*)\|", doc, re.M)
        assert row is not None, f"docs/architecture.md has no row for room {room}"
        named = set(re.findall(r"`(\w+)`", row.group(1)))
        assert named == allowed, (
            f"docs/architecture.md says {room} may import {sorted(named)}; "
            f"the rule is {sorted(allowed)}"
        )


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_every_room_is_a_package(room: str) -> None:
    assert (ROOT / room / "__init__.py").is_file()
