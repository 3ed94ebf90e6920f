"""The documented Pulumi program (docs/your-project.md) runs as-is, as a file, under the public offline runner."""

import re
from pathlib import Path

from eks_ddp.tools.mocking import run_offline

PAGE = Path(__file__).resolve().parents[2] / "docs" / "your-project.md"
SECTION = "## A second example: a PyTorchJob on a Graviton group"


def test_documented_program_runs_as_a_file_under_run_offline(tmp_path: Path) -> None:
    registrations = run_offline(_program(SECTION, tmp_path))
    (workers,) = [r for r in registrations if r.name == "ddp-workers-nodes"]
    assert workers.inputs["instanceTypes"] == ["c7g.16xlarge"]
    assert len([r for r in registrations if r.type == "aws:eks/accessEntry:AccessEntry"]) == 1
    (job,) = [r for r in registrations if r.type == "kubernetes:kubeflow.org/v1:PyTorchJob"]
    worker = job.inputs["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] == "1"  # from the group's shape
    operator_objects = [r.urn for r in registrations if r.name == "ddp-training-operator-manifests"]
    assert operator_objects and operator_objects[0] in job.dependencies  # `depends_on=[platform]` reached the job


def _program(section: str, tmp_path: Path) -> Path:
    text = PAGE.read_text()
    assert section in text, f"{PAGE.name} has no section {section!r}"
    code = re.search(r"```python\n(.*?)```", text.split(section, 1)[1].split("\n## ", 1)[0], re.DOTALL)
    assert code is not None, f"{PAGE.name}'s section {section!r} has no Python example"
    program = tmp_path / "__main__.py"
    program.write_text(code.group(1))
    return program


def test_the_example_on_a_cluster_made_elsewhere_makes_no_cluster_and_places_the_job_on_the_described_group(
    tmp_path: Path,
) -> None:
    registrations = run_offline(_program("## A third example: onto an EKS cluster made elsewhere", tmp_path))
    types = {r.type for r in registrations}
    assert not {"aws:eks/cluster:Cluster", "aws:eks/nodeGroup:NodeGroup", "aws:ec2/vpc:Vpc"} & types, types
    assert "eksddp:index:ExistingNodeGroup" in types and "kubernetes:core/v1:PersistentVolume" in types
    (job,) = [r for r in registrations if r.type == "kubernetes:kubeflow.org/v1:PyTorchJob"]
    worker = job.inputs["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["nodeSelector"]["eks-ddp/node-group"] == "gpu"
    assert worker["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
