"""Fixtures of the model tests: an OpenAIModel talking to the suite's LocalServer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from asyncrecall.models import OpenAIModel
from asyncrecall.testing import LocalServer


@pytest.fixture
async def model(local_server: LocalServer) -> AsyncIterator[OpenAIModel]:
    """Model ``main`` at the local server, without retries (errors surface at once)."""
    async with OpenAIModel(model="main", base_url=local_server.base_url, max_retries=0) as m:
        yield m


@pytest.fixture
def main(model: OpenAIModel) -> OpenAIModel:
    """The ``model`` fixture, named for tests that hold a main and a side model."""
    return model


@pytest.fixture
async def side(local_server: LocalServer) -> AsyncIterator[OpenAIModel]:
    """Model ``side`` at the local server, without retries: a side query's model."""
    async with OpenAIModel(model="side", base_url=local_server.base_url, max_retries=0) as m:
        yield m
