"""Pulumi under mocks: a fresh event loop, options and config per test (see DESIGN.md)."""

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pulumi
import pytest

from eks_ddp.tools.mocking import RecordingMocks, RecordingMonitor, Registration


class Recorded:
    """What a program registered, sorted by name (registration order is not deterministic)."""

    def __init__(self, monitor: RecordingMonitor) -> None:
        self.monitor = monitor

    def run(self, program: Callable[[], Any]) -> list[Registration]:
        pulumi.runtime.test(program)()
        return sorted(self.monitor.registrations, key=lambda registration: (registration.type, registration.name))

    def of_type(self, type_: str) -> list[Registration]:
        return sorted((r for r in self.monitor.registrations if r.type == type_), key=lambda registration: registration.name)

    def named(self, name: str) -> Registration:
        matches = [r for r in self.monitor.registrations if r.name == name]
        assert len(matches) == 1, f"{len(matches)} resources named {name}"
        return matches[0]

    def by_urn(self, urn: str) -> Registration:
        return next(r for r in self.monitor.registrations if r.urn == urn)


@contextmanager
def mocked(mocks: RecordingMocks) -> Iterator[Recorded]:
    """Pulumi's mocks on a new event loop with fresh options and config (DESIGN.md), recording what is registered."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    pulumi.runtime.settings.reset_options()
    pulumi.runtime.set_all_config({})
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="eks-ddp", stack="test", preview=False, monitor=monitor)
    try:
        yield Recorded(monitor)
    finally:
        loop.close()


@pytest.fixture
def pulumi_mocks() -> Iterator[Recorded]:
    with mocked(RecordingMocks()) as recorded:
        yield recorded
