"""The stack program under the Pulumi SDK's mocks: what it registers, without a CLI or an account."""

import asyncio

import pulumi

from infra.mocking import RecordingMocks, RecordingMonitor, Registration
from stack.config import StackConfig
from stack.program import build


def run_under_mocks(config: StackConfig, project: str = "eks-ddp", stack: str = "dev") -> list[Registration]:
    """Every resource the program registers, with parents, inputs and dependencies."""
    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.settings.reset_options()
    pulumi.runtime.set_all_config({})
    mocks = RecordingMocks(config.region)
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=True, monitor=monitor)
    pulumi.runtime.test(lambda: build(config, name=project))()
    return monitor.registrations
