"""The test doubles' own tests start and stop many servers and event loops in a row: the
garbage collector runs after each of them, so anything one leaves open fails that test,
named, rather than the module's last one (see ``tests/conftest.py``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _leaks_fail_in_their_test() -> Iterator[None]:
    yield
    gc.collect()
