"""Algorithm tests run on one CPU thread with a fixed seed: fast on a shared 2-core box, and
deterministic."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _deterministic_torch():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(threads)
