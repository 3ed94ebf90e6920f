"""Each workshop's stack file: it previews offline, and its shape is the workshop's (GPU stacks train over EFA)."""

from typing import Any

import pytest

from infra.mocking import Registration
from stack import node_facts, preview, stack_file
from stack.config import parse
from stack.mocked import run_under_mocks
from tests.workloads.schemas import validate_pytorchjob

WORKSHOP_STACKS = {"dev", "workshop", "gpu", "cpu"}


def _run(stack: str) -> list[Registration]:
    values, region = stack_file.load(stack)
    return run_under_mocks(parse(values, region), stack=stack)


def _named(registrations: list[Registration], name: str) -> dict[str, Any]:
    return next(r for r in registrations if r.name == name).inputs


def test_every_workshop_has_a_stack_file_that_previews_offline(capsys: pytest.CaptureFixture[str]) -> None:
    assert WORKSHOP_STACKS <= set(stack_file.stacks())
    for stack in sorted(stack_file.stacks()):
        assert preview.main(["--stack", stack]) == 0, stack
        assert "Node groups (offline facts" in capsys.readouterr().out


def test_the_gpu_stack_trains_over_efa_on_every_gpu_with_the_cuda_image() -> None:
    registrations = _run("gpu")
    job = _named(registrations, "eks-ddp-train-job")
    validate_pytorchjob(job)
    assert job["spec"]["nprocPerNode"] == "8"
    container = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == "4"  # p4de: 4 network cards
    env = {variable["name"]: variable["value"] for variable in container["env"]}
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    build = _named(registrations, "eks-ddp-image-cuda-build")
    assert build["dockerfile"]["location"].endswith("trainer/Dockerfile.cuda") and build["platforms"] == ["linux/amd64"]
    assert not any(r.name == "eks-ddp-image-build" for r in registrations)  # no CPU image nobody runs
    nodes = _named(registrations, "eks-ddp-gpu-nodes")
    assert nodes["amiType"] == "AL2023_x86_64_NVIDIA" and nodes["labels"]["nvidia.com/gpu.present"] == "true"
    template = _named(registrations, "eks-ddp-gpu-template")
    assert template["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"]
    assert "placement" not in template  # never forced onto a reservation made without it
    plugin = _named(registrations, "eks-ddp-nvidia-device-plugin-chart")
    assert plugin["values"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}


def test_the_cpu_workshops_run_the_slim_image_over_gloo() -> None:
    for stack, cpus in (("workshop", "15"), ("cpu", "1")):
        registrations = _run(stack)
        job = _named(registrations, "eks-ddp-train-job")
        spec = next(iter(job["spec"]["pytorchReplicaSpecs"].values()))["template"]["spec"]
        container = spec["containers"][0]
        limits = container["resources"]["limits"]
        assert limits["cpu"] == cpus and "vpc.amazonaws.com/efa" not in limits
        assert "FI_PROVIDER" not in {variable["name"] for variable in container["env"]}
        assert _named(registrations, "eks-ddp-image-build")["dockerfile"]["location"].endswith("trainer/Dockerfile")


def test_a_group_may_run_its_own_image() -> None:
    values, region = stack_file.load("gpu")
    values["nodeGroups"][1]["image"] = "registry.example/my-cuda-trainer:1"
    registrations = run_under_mocks(parse(values, region))
    container = _named(registrations, "eks-ddp-train-job")["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert container["containers"][0]["image"] == "registry.example/my-cuda-trainer:1"
    assert not any(r.type == "docker-build:index:Image" for r in registrations)


def test_a_type_outside_the_catalogue_is_accepted_offline_and_the_preview_says_what_it_assumed() -> None:
    values, region = stack_file.load("dev")
    values["nodeGroups"][1]["instanceType"] = "c8gn.48xlarge"
    config = parse(values, region)
    (_, group) = node_facts.node_groups(config)
    assert group["assumed"].startswith("c8gn.48xlarge is not in infra.catalogue: assumed 192 vCPUs")
    assert "EC2's facts replace these in `pulumi up`" in group["assumed"]
    registrations = run_under_mocks(config)
    assert _named(registrations, "eks-ddp-workers-nodes")["instanceTypes"] == ["c8gn.48xlarge"]
