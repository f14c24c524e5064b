"""docs/architecture.md's "Where to find" is what scripts/module_index.py generates, and every
product module has a docstring to generate it from."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("module_index", ROOT / "scripts" / "module_index.py")
module_index = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(module_index)


def test_every_product_module_has_a_docstring():
    missing = module_index.missing_docstrings()
    assert not missing, (
        "modules without a docstring (its first line is their entry in docs/architecture.md's "
        "module index): " + ", ".join(missing)
    )


def test_module_index_is_generated():
    text = module_index.DOC.read_text()
    assert module_index.START in text and module_index.END in text, (
        "docs/architecture.md has no module-index markers"
    )
    assert module_index.section(text) == module_index.generate(), (
        "docs/architecture.md's module index differs from the module docstrings: "
        "run `python scripts/module_index.py`"
    )


def test_index_lists_every_package():
    index = module_index.generate()
    for pkg in module_index.PACKAGES:
        assert f"**{pkg}/**" in index
        assert f"`{pkg}/" in index
