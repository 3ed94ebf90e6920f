"""The documented Pulumi program (docs/your-project.md) runs as-is, as a file, under the public offline runner."""

import re
from pathlib import Path

from eks_ddp.stack.mocking import run_offline

PAGE = Path(__file__).resolve().parents[2] / "docs" / "your-project.md"
SECTION = "## A second example: a PyTorchJob on a Graviton group"


def test_documented_program_runs_as_a_file_under_run_offline(tmp_path: Path) -> None:
    text = PAGE.read_text()
    assert SECTION in text, f"{PAGE.name} has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None, f"{PAGE.name}'s section {SECTION!r} has no Python example"
    program = tmp_path / "__main__.py"
    program.write_text(code.group(1))
    registrations = run_offline(program)
    (workers,) = [r for r in registrations if r.name == "ddp-workers-nodes"]
    assert workers.inputs["instanceTypes"] == ["c7g.16xlarge"]
    assert len([r for r in registrations if r.type == "aws:eks/accessEntry:AccessEntry"]) == 1
    (job,) = [r for r in registrations if r.type == "kubernetes:kubeflow.org/v1:PyTorchJob"]
    worker = job.inputs["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] == "1"  # from the group's shape
    operator_objects = [r.urn for r in registrations if r.name == "ddp-training-operator-manifests"]
    assert operator_objects and operator_objects[0] in job.dependencies  # `depends_on=[platform]` reached the job
