"""Every docstring example in the product packages runs as a test (docs that drift from code fail).

The modules are found by walking the packages that pyproject's ``[tool.setuptools.packages.find]``
ships and keeping the files with a ``>>>`` line: a new module with examples is picked up without
editing this file, and a module without examples is not even imported. Each module's examples
run with ``doctest`` (``ELLIPSIS`` on, as pytest's own doctest runner has it, and
``NORMALIZE_WHITESPACE``, so a long expected output or error message may wrap at the line limit),
and the test checks that doctest found as many examples as the file has ``>>>`` lines, so an example
doctest cannot see (one in a plain string, or in a function nested in a function) fails here instead
of silently not running.

A module whose optional third-party dependency is missing (rclpy without the ``robot`` extra,
MuJoCo without ``sim``, ...) is skipped, naming the package; a missing module of this repo fails.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import io
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# module -> (fixture its examples need, the marker that says so): the channel examples talk to
# the test run's Ray instance
NEEDS: dict[str, tuple[str, pytest.MarkDecorator]] = {
    "learner.channel.channel": ("ray_cluster", pytest.mark.ray)
}


def product_packages() -> list[str]:
    """The top-level packages the wheel ships, from pyproject's package ``include`` patterns."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        include = tomllib.load(f)["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({pattern.rstrip("*").split(".")[0] for pattern in include})


def prompt_lines(path: Path) -> int:
    """How many lines of ``path`` start a docstring example (``>>>``, after indentation)."""
    return sum(line.lstrip().startswith(">>>") for line in path.read_text().splitlines())


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules_with_examples() -> dict[str, Path]:
    """Module name -> file, for every product module with at least one ``>>>`` line."""
    found = {}
    for package in product_packages():
        for path in sorted((ROOT / package).rglob("*.py")):
            if prompt_lines(path):
                found[module_name(path)] = path
    return found


MODULES = modules_with_examples()


def import_or_skip(name: str):
    """Import ``name``; skip when a third-party package it needs is not installed."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        missing = (err.name or "").split(".")[0]
        if not missing or missing in product_packages():
            raise
        pytest.skip(f"{name} needs {missing!r}, which is not installed here")


def test_examples_are_found() -> None:
    """The walk sees the packages and their examples (an empty walk would pass everything)."""
    assert "learner" in product_packages() and "rlinf_contracts" in product_packages()
    assert len(MODULES) >= 50, f"only {len(MODULES)} modules with examples found: {sorted(MODULES)}"
    assert "rlinf_contracts.wire" in MODULES and "learner.placement" in MODULES


def problems(module, path: Path) -> list[str]:
    """What is wrong with the examples of ``module`` (read from ``path``); empty when all run and
    pass."""
    tests = doctest.DocTestFinder().find(module)
    found = sum(len(t.examples) for t in tests)
    expected = prompt_lines(path)
    out = []
    if found != expected:
        out.append(
            f"{path.name} has {expected} '>>>' lines but doctest finds {found} examples: put every "
            "example in a module, class or function docstring doctest can reach"
        )
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    for test in tests:
        runner.run(test, out=report.write)
    if runner.failures:
        out.append(f"{runner.failures} of {runner.tries} examples failed:\n{report.getvalue()}")
    if not runner.tries:
        out.append(
            f"{module.__name__}: no example ran (all skipped?); make at least one of them run"
        )
    return out


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[NEEDS[n][1]] if n in NEEDS else []) for n in MODULES]
)
def test_docstring_examples_run(name: str, request: pytest.FixtureRequest) -> None:
    if name in NEEDS:
        request.getfixturevalue(NEEDS[name][0])
    assert problems(import_or_skip(name), MODULES[name]) == []


PLANTED = '''"""A module whose examples are wrong.

>>> 1 + 1
3
"""

def f():
    def g():
        """Nested in a function: doctest never looks here.

        >>> g()
        """
    return g
'''


def test_a_wrong_and_an_unreachable_example_are_caught(tmp_path: Path) -> None:
    path = tmp_path / "planted_examples.py"
    path.write_text(PLANTED)
    spec = importlib.util.spec_from_file_location("planted_examples", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = problems(module, path)
    assert len(found) == 2, found
    assert "2 '>>>' lines but doctest finds 1" in found[0]
    assert "1 of 1 examples failed" in found[1] and "Expected:\n    3\nGot:\n    2" in found[1]
