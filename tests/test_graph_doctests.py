"""The examples in the graph modules' docstrings are tested like any other code."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "gcfkit.header",
    "gcfkit.graph",
    "gcfkit.graph.model",
    "gcfkit.graph.encoder",
    "gcfkit.graph.decoder",
    "gcfkit.graph.stream",
    "gcfkit.graph.session",
    "gcfkit.graph.delta",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
