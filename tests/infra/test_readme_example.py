"""The README's Pulumi program runs (under mocks) and builds what it says."""

import re
from pathlib import Path

from tests.pulumi_harness import Recorded

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_program_runs_under_mocks(pulumi_mocks: Recorded) -> None:
    section = README.read_text().split("## Deploying with `pulumi up`", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None, "the README's deploy section has no Python example"
    pulumi_mocks.run(lambda: exec(compile(code.group(1), "README.md", "exec"), {}))
    assert pulumi_mocks.named("ddp-workers-nodes").inputs["instanceTypes"] == ["c7g.16xlarge"]
    assert len(pulumi_mocks.of_type("aws:eks/accessEntry:AccessEntry")) == 1
