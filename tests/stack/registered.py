"""What the stack program registers for a stack file's values, run once per test process.

Many tests read the same stack under the same config (dev as written: 13 runs in tests/stack alone); a run costs
about 0.4 CPU-s. Runs are deterministic (the rehearsal's idempotence rule checks it), so one run serves them all;
each caller gets its own copy, to plant defects in. What must be two runs (idempotence) calls run_under_mocks.
"""

import copy
import functools
import json
from typing import Any

from eks_ddp.stack.config import parse
from eks_ddp.tools.mocking import run_under_mocks
from eks_ddp.tools.mocking import Registration


def registered(values: dict[str, Any], region: str | None, stack: str = "dev") -> list[Registration]:
    """run_under_mocks(parse(values, region), stack=stack), from the process's one run of it."""
    return copy.deepcopy(list(_run(json.dumps(values, sort_keys=True), region, stack)))


@functools.cache
def _run(values: str, region: str | None, stack: str) -> tuple[Registration, ...]:
    return tuple(run_under_mocks(parse(json.loads(values), region), stack=stack))
