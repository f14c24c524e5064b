"""Write the module index of docs/architecture.md ("Where to find") from the module docstrings.

    python scripts/module_index.py           # rewrite the section between the markers
    python scripts/module_index.py --check   # exit 1: the section is stale or a docstring missing

One line per module file of every product package: its path and the first line of its
docstring. Empty ``__init__.py`` files are left out; any other module without a docstring is
an error (``tests/test_module_index.py`` checks both).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = (
    "rlinf_contracts",
    "rlinf_data",
    "sim_bridges",
    "robot_drivers",
    "policy_server",
    "rlinf_ros",
    "learner",
    "rlinf_cli",
)
START = "<!-- module-index:start -->"
END = "<!-- module-index:end -->"


def modules(package: str) -> list[Path]:
    """Every ``.py`` file of a package, sorted by path; empty ``__init__.py`` files left out."""
    files = sorted(
        p
        for p in (ROOT / package).rglob("*.py")
        if "__pycache__" not in p.parts
        and not (p.name == "__init__.py" and not p.read_text().strip())
    )
    return files


def first_line(path: Path) -> str | None:
    """The first line of a module's docstring, or None when it has none."""
    doc = ast.get_docstring(ast.parse(path.read_text(), filename=str(path)))
    if not doc or not doc.strip():
        return None
    return doc.strip().splitlines()[0].strip().replace("``", "`")


def missing_docstrings() -> list[str]:
    """Product modules (other than empty ``__init__.py`` files) without a docstring."""
    return [
        str(p.relative_to(ROOT)) for pkg in PACKAGES for p in modules(pkg) if first_line(p) is None
    ]


def generate() -> str:
    """The index: a bold heading per package, one bullet per module."""
    lines: list[str] = []
    for pkg in PACKAGES:
        lines += [f"**{pkg}/**", ""]
        for p in modules(pkg):
            line = first_line(p) or "(no docstring)"
            lines.append(f"- `{p.relative_to(ROOT)}` — {line}")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def section(text: str) -> str:
    """What ``text`` holds between the markers (without them)."""
    if START not in text or END not in text:
        raise SystemExit(f"{DOC.relative_to(ROOT)} has no {START} ... {END} markers")
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def render(text: str) -> str:
    """``text`` with the section between the markers replaced by the generated index."""
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    return f"{head}{START}\n{generate()}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check; exit 1 when stale")
    args = ap.parse_args(argv)
    text = DOC.read_text()
    missing = missing_docstrings()
    if args.check:
        stale = section(text) != generate()
        if stale:
            doc = DOC.relative_to(ROOT)
            print(f"{doc}: module index is stale: run `python scripts/module_index.py`")
        for m in missing:
            print(f"{m}: no module docstring")
        return 1 if stale or missing else 0
    section(text)  # the markers must be there
    new = render(text)
    if new != text:
        DOC.write_text(new)
        print(f"wrote the module index of {DOC.relative_to(ROOT)}")
    for m in missing:
        print(f"{m}: no module docstring", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
