"""The kit as a pytest test class to subclass."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import ClassVar

import pytest

from asyncrecall.testing import LocalServer
from asyncrecall_conformance._cases import Case, cases
from asyncrecall_conformance._driver import Driver
from asyncrecall_conformance._harness import Harness

__all__ = ["ConformanceSuite"]


class ConformanceSuite:
    """Every case of the kit, for one driver: subclass it as ``Test...`` and give it a
    ``driver`` fixture that returns your :class:`Driver`.

    ``case_marks`` adds pytest marks to cases by id (e.g. ``plain_loop``, ``xfail``);
    marks on the whole class go in the subclass's ``pytestmark``. Override the
    ``conformance_server`` fixture to share one :class:`LocalServer` (by default each
    test starts its own). The tests are ``async``: they need pytest-asyncio.
    """

    case_marks: ClassVar[Mapping[str, Sequence[pytest.MarkDecorator]]] = {}

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Parametrise :meth:`test_conformance` with every case (pytest calls it)."""
        if "conformance_case" in metafunc.fixturenames:
            metafunc.parametrize("conformance_case", cases(marks=self.case_marks))

    @pytest.fixture
    def conformance_server(self, driver: Driver) -> Iterator[LocalServer]:
        """A fresh server of the driver's :attr:`Driver.server_type` for the test: the
        side model, and the main model unless the driver's :meth:`Driver.wire` says
        otherwise."""
        with driver.server_type() as server:
            yield server

    @pytest.mark.asyncio
    async def test_conformance(
        self,
        conformance_case: Case,
        driver: Driver,
        conformance_server: LocalServer,
        tmp_path: Path,
    ) -> None:
        """One case of the recall contract (its docstring: ``conformance_case.doc``)."""
        await conformance_case(Harness(driver, conformance_server, tmp_path / "memory"))
