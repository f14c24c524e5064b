"""Docstring examples of the modules issue 16 added or changed run as tests."""

import doctest
import importlib

import pytest


@pytest.mark.parametrize("module", ["rlinf_contracts.config.loader", "rlinf_cli.summary", "learner.runners.budget",
                                    "learner.cluster"])
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module))
    assert result.failed == 0 and result.attempted > 0
