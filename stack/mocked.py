"""The stack program under the Pulumi SDK's mocks: what it registers, without a CLI or an account."""

from infra.mocking import Registration, run_offline
from stack.config import StackConfig
from stack.program import build


def run_under_mocks(config: StackConfig, project: str = "eks-ddp", stack: str = "dev") -> list[Registration]:
    """Every resource the program registers, with parents, inputs and dependencies."""
    return run_offline(lambda: build(config, name=project), config.region, project, stack)
