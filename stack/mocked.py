"""The stack program under the Pulumi SDK's mocks: what it registers, without a CLI or an account."""

from eks_ddp.stack.config import StackConfig
from eks_ddp.stack.mocking import Registration, run_offline
from eks_ddp.stack.program import build


def run_under_mocks(config: StackConfig, project: str = "eks-ddp", stack: str = "dev") -> list[Registration]:
    """Every resource the program registers, with parents, inputs and dependencies."""
    return run_offline(lambda: build(config, name=project), config.region, project, stack)
