"""Each workshop's stack file: it previews offline, and its shape is the workshop's (GPU stacks train over EFA)."""

from datetime import date
from typing import Any

import pytest

from eks_ddp.tools import node_facts, preview, stack_file
from eks_ddp.stack.config import ConfigError, parse
from eks_ddp.tools.mocking import run_under_mocks
from eks_ddp.tools.mocking import Registration
from eks_ddp.workloads.image import BUILD_ARGS, Accelerator
from tests.workloads.schemas import validate_pytorchjob
from tests.stack.registered import registered

WORKSHOP_STACKS = {"dev", "workshop", "gpu", "gpu-existing", "cpu"}


def _run(stack: str) -> list[Registration]:
    values, region = stack_file.load(stack)
    return registered(values, region, stack)


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
    builds = [r.name for r in registrations if r.type == "docker-build:index:Image"]
    assert builds == ["eks-ddp-image-cuda-build"]  # for the p4d and g4dn.metal groups, which name none
    for group in values["nodeGroups"][1:]:
        group["image"] = "registry.example/my-cuda-trainer:1"
    assert not any(r.type == "docker-build:index:Image" for r in run_under_mocks(parse(values, region)))


def _priced(registrations: list[Registration], item: str) -> float | None:
    """The unit price the preview's cost estimate gives the node group named in `item` (None: unknown)."""
    from datetime import date

    from eks_ddp.tools import cost
    from eks_ddp.engine_models import Deployment

    lines = cost.estimate(Deployment(registrations, "us-east-1", "arn:aws:iam::123456789012:role/ci", date(2026, 11, 24)))
    (line,) = [line for line in lines if item in line.item]
    return line.unit_hourly if line.priced else None


@pytest.mark.parametrize(
    ("instance_type", "facts", "price"),
    [
        ("p6-b200.48xlarge", "x86_64, 192 vCPUs, 2048 GiB, GPUs 8 x B200, 8 EFA interfaces", 113.9328),
        ("g4dn.metal", "x86_64, 96 vCPUs, 384 GiB, GPUs 8 x T4, 1 EFA interfaces", 7.824),
        ("g6e.12xlarge", "x86_64, 48 vCPUs, 384 GiB, GPUs 4 x L40S, 1 EFA interfaces", 10.49264),
    ],
)
def test_any_current_gpu_type_previews_with_ec2s_facts_and_price(instance_type: str, facts: str, price: float) -> None:
    values, region = stack_file.load("gpu")
    values["nodeGroups"][1]["instanceType"] = instance_type
    config = parse(values, region)
    (line,) = [line for line in node_facts.lines(node_facts.node_groups(config)) if line.startswith("  gpu:")]
    assert f"{instance_type} ({facts})" in line
    registrations = run_under_mocks(config)
    assert any(r.type == "docker-build:index:Image" and "Dockerfile.cuda" in str(r.inputs) for r in registrations)
    assert _priced(registrations, f"eks-ddp-gpu-nodes ({instance_type}") == price


def test_a_type_that_is_not_ec2s_or_has_no_supported_accelerator_is_one_line_naming_the_key() -> None:
    values, region = stack_file.load("dev")
    values["nodeGroups"][1]["instanceType"] = "c7g.16xlarg"
    with pytest.raises(
        ConfigError,
        match=r"eks-ddp:nodeGroups\[1\]\.instanceType: 'c7g\.16xlarg' is not allowed; "
        r"no EC2 type of that name is known offline .*; did you mean c7g\.16xlarge",
    ):
        parse(values, region)
    values, region = stack_file.load("gpu")
    values["nodeGroups"][1]["instanceType"] = "inf1.24xlarge"
    with pytest.raises(ConfigError, match="inf1.24xlarge is an Inferentia1 type, which the current Neuron SDK"):
        parse(values, region)
    values["nodeGroups"][1]["instanceType"] = "trn1.32xlarge"  # the job's group: the bundled trainer cannot run there
    with pytest.raises(
        ConfigError,
        match=r"eks-ddp:job\.script: None is not allowed; node group gpu has 16 Neuron "
        r"devices \(trn1\.32xlarge\), which the bundled trainer does not run on",
    ):
        parse(values, region)
    values["nodeGroups"][1]["instanceType"] = "g4ad.16xlarge"
    with pytest.raises(ConfigError, match="g4ad.16xlarge has amd GPUs .RADEON-PRO-V520.; eks-ddp supports NVIDIA"):
        parse(values, region)


def test_the_gpu_workshop_shape_reuses_its_vpc_and_mounts_its_file_system_statically() -> None:
    from eks_ddp.engine_models import Deployment, check
    from tests.workloads.schemas import validate_core

    registrations = _run("gpu-existing")
    assert not [r for r in registrations if r.type == "aws:ec2/vpc:Vpc"]
    assert _named(registrations, "eks-ddp-gpu-nodes")["subnetIds"] == ["subnet-0123456789abcdef0"]
    volume = _named(registrations, "eks-ddp-existing-fsx-volume")
    claim = _named(registrations, "eks-ddp-existing-fsx-claim")
    for manifest in (volume, claim):
        validate_core(preview._integral({key: manifest[key] for key in ("apiVersion", "kind", "metadata", "spec")}))
    csi = volume["spec"]["csi"]
    assert csi["driver"] == "fsx.csi.aws.com" and csi["volumeHandle"] == "fs-0123456789abcdef0"
    dns = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
    assert csi["volumeAttributes"] == {"dnsname": dns, "mountname": "abcdefgh"}
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain" and volume["spec"]["storageClassName"] == ""
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"] and claim["spec"]["storageClassName"] == ""
    rules = [r.inputs for r in registrations if r.name.startswith("eks-ddp-existing-fsx-lustre-")]
    assert {(rule["fromPort"], rule["toPort"]) for rule in rules} == {(988, 988), (1018, 1023)}
    assert {rule["securityGroupId"] for rule in rules} == {"sg-0123456789abcdef0"}
    assert not [r for r in registrations if r.type == "kubernetes:storage.k8s.io/v1:StorageClass"]
    assert any(r.name == "eks-ddp-nccl-check-mpijob" for r in registrations)
    # The static volume is FSx too: a pod whose first user of it is not root is reported, as on a new one.
    job = next(r for r in registrations if r.name == "eks-ddp-train-job")
    for replica in job.inputs["spec"]["pytorchReplicaSpecs"].values():
        init = replica["template"]["spec"]["initContainers"]
        replica["template"]["spec"]["initContainers"] = [c for c in init if c["name"] != "volume-permissions"]
    findings = [str(f) for f in check(Deployment(registrations, "us-east-1", "arn:aws:iam::1:role/x", date.today()))]
    assert any(f.startswith("volume-ownership: PyTorchJob eks-ddp-train-job") for f in findings), findings


@pytest.mark.parametrize(
    ("storage", "message"),
    [
        (
            {"kind": "existing-fsx", "fileSystemId": "fs-1"},
            "eks-ddp:storage.fileSystemId: 'fs-1' is not allowed; use an id",
        ),
        (
            {"kind": "existing-fsx", "deploymentType": "SCRATCH_2"},
            "eks-ddp:storage.deploymentType: 'SCRATCH_2' is not allowed; it applies to kind fsx, not existing-fsx",
        ),
    ],
)
def test_existing_file_system_settings_are_checked(storage: dict[str, Any], message: str) -> None:
    from eks_ddp.stack.config import ConfigError

    values, region = stack_file.load("gpu-existing")
    values["storage"] = {**values["storage"], **storage}
    with pytest.raises(ConfigError) as raised:
        parse(values, region)
    assert str(raised.value).startswith(message)


def test_the_job_uploads_to_the_model_bucket_with_its_service_account() -> None:
    registrations = _run("dev")
    spec = _named(registrations, "eks-ddp-train-job")["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    command = spec["containers"][0]["command"]
    run = command[command.index("--run-name") + 1].split("/")[-1]
    artifact, checkpoints = (command[command.index(flag) + 1] for flag in ("--artifact-uri", "--checkpoint-uri"))
    assert artifact.startswith("s3://") and artifact.endswith(f"/runs/mnist-ddp/{run}")
    assert checkpoints == artifact.replace(f"/runs/mnist-ddp/{run}", f"/checkpoints/mnist-ddp/{run}")
    account = _named(registrations, "eks-ddp-models-service-account")
    assert spec["serviceAccountName"] == account["metadata"]["name"]
    association = _named(registrations, "eks-ddp-models-role-association")  # EKS Pod Identity: test_bucket_access's role
    assert (association["namespace"], association["serviceAccount"]) == ("training", spec["serviceAccountName"])
    assert association["roleArn"] == _named(registrations, "eks-ddp-models-role")["arn"]
    urn = next(r.urn for r in registrations if r.name == "eks-ddp-models-role-association")
    pod_makers = [r for r in registrations if r.name in ("eks-ddp-train-job", "eks-ddp-data-job", "eks-ddp-evaluate-job")]
    assert len(pod_makers) == 3 and all(urn in r.dependencies for r in pod_makers)  # no pod before its credentials


def test_the_cpu_tutorials_stack_keeps_everything_in_the_bucket_and_mounts_no_claim() -> None:
    registrations = _run("cpu")
    assert not [r for r in registrations if r.type == "kubernetes:core/v1:PersistentVolumeClaim"]
    assert not any(r.name == "eks-ddp-data-job" for r in registrations)  # each pod fetches its data itself
    job = _named(registrations, "eks-ddp-train-job")
    evaluation = _named(registrations, "eks-ddp-evaluate-job")
    for spec in (
        *(r["template"]["spec"] for r in job["spec"]["pytorchReplicaSpecs"].values()),
        evaluation["spec"]["template"]["spec"],
    ):
        assert {"name": "shared", "emptyDir": {}} in spec["volumes"]
        assert not any("persistentVolumeClaim" in volume for volume in spec["volumes"])
        assert "prepare-data" in [c["name"] for c in spec["initContainers"]]
    command = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("--artifact-uri") + 1].startswith("s3://")
    evaluate = evaluation["spec"]["template"]["spec"]["containers"][0]["command"]
    model = evaluate[evaluate.index("--model-uri") + 1]
    assert model == command[command.index("--artifact-uri") + 1] + "/model.pt" and "--wait-minutes" in evaluate


def test_the_v100_group_gets_the_cu126_build() -> None:
    """Seed 002's p3dn.24xlarge: torch 2.13's cu130 wheels start at Turing, so its pods would stop at the first
    kernel with `no kernel image is available`; the stack builds Dockerfile.cuda on CUDA 12.6 with the cu126 wheel
    for it."""
    values, region = stack_file.load("gpu-existing")
    assert values["nodeGroups"][1]["instanceType"] == "p3dn.24xlarge"
    builds = [r for r in run_under_mocks(parse(values, region)) if r.type == "docker-build:index:Image"]
    assert [(b.name, b.inputs.get("buildArgs")) for b in builds] == [
        ("eks-ddp-image-cuda126-build", BUILD_ARGS[Accelerator.CUDA126])
    ]


def test_every_gpu_group_of_every_stack_file_has_a_published_nccl_floor() -> None:
    """The NCCL check passed p4d/p4de at any bandwidth: each shipped GPU type now has a floor from a published
    result, and the preview says which (or that a type has none)."""
    floors = {}
    for stack in stack_file.stacks():
        values, region = stack_file.load(stack)
        for record in node_facts.node_groups(parse(values, region)):
            if record["gpus"] != "none" and record["efa_interfaces"]:
                floors[record["instance_type"]] = record["nccl_check"]
    elsewhere = {name: floors.pop(name) for name in ("p4d.24xlarge", "g4dn.metal")}  # seed 003's other groups
    not_run = "not run on this group: it runs on gpu (the job's group, or the first that qualifies); here it would hold "
    assert elsewhere == {
        "p4d.24xlarge": not_run + "at least 62.4 GB/s at 2G (as p4de.24xlarge: same 4 x 100 Gb/s EFA and A100 NVSwitch)",
        "g4dn.metal": not_run + "no published figure for g4dn.metal: the check reports the bandwidth and passes",
    }
    published = {name: floors.pop(name) for name in ("p4de.24xlarge",)}
    assert all(floor.startswith("at least 62.4 GB/s at 2G") for floor in published.values()), published
    # p3dn.24xlarge (seed 002): AWS publishes no two-node all_reduce_perf result; the preview says so.
    assert floors == {
        "p3dn.24xlarge": "no published figure for p3dn.24xlarge: the check reports the bandwidth and passes"
    }


def test_the_trainium_stack_runs_the_users_neuron_code_on_every_device_and_efa_interface() -> None:
    """trn1.32xlarge: the EKS Neuron AMI, AWS's Neuron device plugin tolerating the group's taint, all 16 devices and
    8 EFA interfaces per pod, torchrun over its 32 NeuronCores, AWS's Neuron-over-EFA variables, no image built, and
    the Cluster Autoscaler told the devices a node it has not launched will have."""
    values, region = stack_file.load("trainium")
    lines = node_facts.lines(node_facts.node_groups(parse(values, region)))
    assert "  trainium: trn1.32xlarge (x86_64, 128 vCPUs, 512 GiB, 16 Neuron devices, 8 EFA interfaces)" in "\n".join(
        lines
    )
    registrations = _run("trainium")
    group = _named(registrations, "eks-ddp-trainium-nodes")
    assert group["amiType"] == "AL2023_x86_64_NEURON" and group["instanceTypes"] == ["trn1.32xlarge"]
    template = _named(registrations, "eks-ddp-trainium-template")
    assert len(template["networkInterfaces"]) == 8  # one EFA interface per network card
    plugin = _named(registrations, "eks-ddp-neuron-device-plugin-chart")
    assert (plugin["chart"], plugin["version"]) == ("oci://public.ecr.aws/neuron/neuron-helm-chart", "1.9.0")
    assert plugin["values"]["npd"] == {"enabled": False} and plugin["values"]["scheduler"] == {"enabled": False}
    assert {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"} in plugin["values"][
        "devicePlugin"
    ]["tolerations"]
    job = _named(registrations, "eks-ddp-train-job")
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert job["spec"]["nprocPerNode"] == "32"
    assert {key: master["resources"]["limits"][key] for key in ("aws.amazon.com/neuron", "vpc.amazonaws.com/efa")} == {
        "aws.amazon.com/neuron": "16",
        "vpc.amazonaws.com/efa": "8",
    }
    env = {e["name"]: e.get("value") for e in master["env"]}
    assert (env["FI_PROVIDER"], env["FI_EFA_USE_DEVICE_RDMA"], env["CCOM_SOCKET_IFNAME"]) == ("efa", "1", "eth0")
    assert master["image"].endswith("/neuron-training:1") and "OMP_NUM_THREADS" not in env
    assert not any(r.type == "docker-build:index:Image" for r in registrations)
    assert _priced(registrations, "eks-ddp-trainium-nodes (trn1.32xlarge") == 21.5
    tags = {
        r.inputs["tag"]["key"]: r.inputs["tag"]["value"] for r in registrations if r.type == "aws:autoscaling/tag:Tag"
    }
    assert tags["k8s.io/cluster-autoscaler/node-template/resources/aws.amazon.com/neuron"] == "16"
