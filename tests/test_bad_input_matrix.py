"""Invalid input across every layer: it must fail before anything is registered or trained,
with a message that names the key or argument and says what is allowed."""

import copy
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi_kubernetes as k8s
import pytest

from eks_ddp.infra.aws.cluster import Cluster
from eks_ddp.infra.aws.efa_node_group import EfaNodeGroup, shape_of
from eks_ddp.infra.aws.network import Network
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.platform import TrainingPlatform
from eks_ddp.infra.storage.fsx import FsxLustreStorage
from eks_ddp.tools import stack_file
from eks_ddp.stack import sections
from eks_ddp.stack.config import ConfigError, StackConfig, parse
from eks_ddp.stack.keys import Section
from eks_ddp.stack.sections import ADDONS, EXISTING_CLUSTER, JOB, NODE_GROUP, STORAGE, SYSTEM, TAINT, VPC, top_level
from eks_ddp.stack.project_config import StackFileError
from eks_ddp.trainer import cli, flags
from eks_ddp.workloads.components import PyTorchJob
from eks_ddp.workloads.training_pod import TrainingJobSpec
from tests.pulumi_harness import Recorded

DEV, REGION = stack_file.load("dev")
GPU_EXISTING = stack_file.load("gpu-existing")[0]  # existing-fsx storage
GROUP = {"cluster_name": "c", "vpc_id": "v", "cluster_security_group_id": "s", "instance_type": "c7g.16xlarge", "availability_zone": "us-east-1a", "subnet_id": "n", "max_size": 2}
OIDC = {"oidc_provider_arn": "arn:aws:iam::1:oidc-provider/x", "oidc_issuer": "x"}


def _config(path: str, value: object, **job: object) -> Callable[[], object]:
    def attempt() -> object:
        values: Any = copy.deepcopy(DEV)
        values["job"].update(job)
        target = values
        *parents, last = path.split(".")
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
        return parse(values, REGION)
    return attempt


def _small_group_job() -> Callable[[], object]:
    def attempt() -> object:
        values: Any = copy.deepcopy(DEV)
        values["nodeGroups"].append({"name": "small", "instanceType": "t4g.small", "efa": False,
                                     "availabilityZone": "us-east-1a", "maxSize": 2})
        values["job"]["nodeGroup"] = "small"
        return parse(values, REGION)
    return attempt


def _storage(values: dict[str, Any], **keys: object) -> Callable[[], object]:
    return lambda: parse({**values, "storage": {**values["storage"], **keys}}, REGION)


def _stack_file(line: str) -> Callable[[], object]:
    def attempt() -> object:
        with tempfile.TemporaryDirectory() as directory:
            root = Path(directory)
            shutil.copy(stack_file.ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
            (root / "Pulumi.scratch.yaml").write_text(f"config:\n  aws:region: us-east-1\n  {line}\n")
            values, region = stack_file.load("scratch", root)
            return parse(values, region)
    return attempt


def _component(build: Callable[[], object]) -> Callable[[], object]:
    return build


def _job(**overrides: Any) -> Callable[[], object]:
    def attempt() -> object:
        job: TrainingJobSpec = {"name": "mnist", "namespace": "training", "image": "img", **overrides}  # type: ignore[typeddict-item]
        return PyTorchJob("train", {"provider": k8s.Provider("k8s", kubeconfig="{}"), "node_group": shape_of(GROUP), "job": job})  # type: ignore[arg-type]
    return attempt


def _trainer(*argv: str) -> Callable[[], object]:
    return lambda: cli.main(["train", *argv])


CASES: list[tuple[str, Callable[[], object], str]] = [
    # Stack configuration (Pulumi.<stack>.yaml): errors name the config key.
    ("config: instance type without EFA", _config("nodeGroups.1.instanceType", "c7g.large"), "eks-ddp:nodeGroups[1].efa: True is not allowed; c7g.large does not support EFA; turn efa off"),
    ("config: not an instance type", _config("nodeGroups.1.instanceType", "c7g"), "eks-ddp:nodeGroups[1].instanceType: 'c7g' is not allowed; give an EC2 instance type such as"),
    ("config: minSize > maxSize", _config("nodeGroups.1.minSize", 8), "eks-ddp:nodeGroups[1].minSize: 8 is not allowed; need 0 <= nodeGroups[1].minSize <= nodeGroups[1].maxSize"),
    ("config: desiredSize outside the range", _config("nodeGroups.1.desiredSize", 0), "eks-ddp:nodeGroups[1].desiredSize: 0 is not allowed; must lie between nodeGroups[1].minSize=1 and nodeGroups[1].maxSize=6"),
    ("config: zone outside the VPC's", _config("nodeGroups.1.availabilityZone", "us-west-2a"), "eks-ddp:nodeGroups[1].availabilityZone: 'us-west-2a' is not allowed; use one of eks-ddp:vpc.availabilityZones (us-east-1a, us-east-1b)"),
    ("config: CIDR too small", _config("vpc.cidr", "10.0.0.0/25"), "eks-ddp:vpc.cidr: '10.0.0.0/25' is not allowed; the prefix must be /16 to /24"),
    ("config: FSx capacity 1000 GiB", _config("storage.capacityGiB", 1000), "eks-ddp:storage.capacityGiB: 1000 is not allowed; use 1200, 2400 or a multiple of 2400 GiB"),
    ("config: unknown storage kind", _config("storage.kind", "ebs"), "eks-ddp:storage.kind: 'ebs' is not allowed; use fsx, existing-fsx, efs, none"),
    ("config: negative epochs", _config("job.epochs", -2), "eks-ddp:job.epochs: -2 is not allowed; use a whole number >= 1"),
    ("config: job on a missing node group", _config("job.nodeGroup", "gpu"), "eks-ddp:job.nodeGroup: 'gpu' is not allowed; use one of the node groups: system, workers"),
    ("config: more replicas than maxSize", _config("job.replicas", 9), "eks-ddp:job.replicas: 9 is not allowed; node group workers holds at most 6 pods"),
    ("config: more replicas than a fixed group's nodes", _config("autoscaler", "none", replicas=3), "eks-ddp:job.replicas: 3 is not allowed; node group workers keeps its desiredSize=2 nodes, one pod each (eks-ddp:autoscaler none adds none)"),
    ("config: job name not DNS-1035", _config("job.name", "Mnist.DDP"), "eks-ddp:job.name: 'Mnist.DDP' is not allowed; must be a DNS-1035 label"),
    ("config: job name too long for its services", _config("job.name", "j" * 50), "eks-ddp:job.name: '" + "j" * 50 + "' is not allowed; must be at most 48 characters"),
    ("config: unknown dataset", _config("job.dataset", "imagenet"), "eks-ddp:job.dataset: 'imagenet' is not allowed; use one of digits, mnist, cifar10, synthetic"),
    ("config: misspelt key", _config("nodeGroups.1.maxsize", 3), "eks-ddp:nodeGroups[1].maxsize: 3 is not allowed; known keys are"),
    ("config: bad NAT layout", _config("vpc.natGateways", "many"), "eks-ddp:vpc.natGateways: 'many' is not allowed"),
    # Checked by the components after resources were registered, now in the stack config first.
    ("config: Kubernetes version 1.x", _config("kubernetesVersion", "1.x"), "eks-ddp:kubernetesVersion: '1.x' is not allowed; use one of 1.34, 1.35"),
    ("config: Kubernetes version out of support", _config("kubernetesVersion", "1.33"), "eks-ddp:kubernetesVersion: '1.33' is not allowed"),
    ("config: system nodes of no type", _config("nodeGroups.0.instanceType", "c5 2xlarge"), "eks-ddp:nodeGroups[0].instanceType: 'c5 2xlarge' is not allowed; give an EC2 instance type"),
    ("config: no system nodes", _config("nodeGroups.0.desiredSize", 0), "eks-ddp:nodeGroups[0].desiredSize: 0 is not allowed; use 1 to 10"),
    ("config: admin that is not an IAM ARN", _config("adminPrincipalArns", ["alice"]), "eks-ddp:adminPrincipalArns: 'alice' is not allowed; give IAM role or user ARNs"),
    ("config: cluster name", _config("clusterName", "-eks"), "eks-ddp:clusterName: '-eks' is not allowed; use 1-100 letters"),
    ("config: namespace not a DNS label", _config("trainingNamespace", "Training_NS"), "eks-ddp:trainingNamespace: 'Training_NS' is not allowed; use a DNS label"),
    ("config: unknown way to give roles", _config("serviceAccountRoles", "keys"), "eks-ddp:serviceAccountRoles: 'keys' is not allowed; use one of pod-identity, irsa"),
    ("config: negative checkpoint expiry", _config("checkpointExpiryDays", -3), "eks-ddp:checkpointExpiryDays: -3 is not allowed; use a positive number of days"),
    ("config: elastic minimum above replicas", _config("job.elasticMinReplicas", 5), "eks-ddp:job.elasticMinReplicas: 5 is not allowed; use 1 to replicas (2)"),
    ("config: an elastic range that cannot keep the global batch", _config("job.elasticMinReplicas", 2, replicas=3, batchSize=5), "eks-ddp:job.elasticMinReplicas: 2 is not allowed; 2 pods cannot share the job's global batch (5 per pod x 3 pods) evenly; use 3 or more"),
    ("config: data preparation for an offline dataset", _config("job.prepareData", True, dataset="digits"), "eks-ddp:job.prepareData: True is not allowed; only mnist, cifar10 are downloaded"),
    ("config: AMI pin before EFA", _config("nodeGroups.1.releaseVersion", "1.35.0-20260401"), "eks-ddp:nodeGroups[1].releaseVersion: '1.35.0-20260401' is not allowed; EFA on AL2023_ARM_64_STANDARD needs the AMI release of 20260505"),
    ("config: hugepages (retired)", _config("job.hugepagesMiB", 5120), "eks-ddp:job.hugepagesMiB: 5120 is not allowed; removed: a training pod asking for huge pages never gets a Karpenter node"),
    ("config: FSx options on EFS", _config("storage.kind", "efs"), "eks-ddp:storage.capacityGiB: 1200 is not allowed; it applies to kind fsx or existing-fsx, not efs"),
    ("config: a job on 2-GiB nodes", _small_group_job(), "eks-ddp:job.nodeGroup: 'small' is not allowed; t4g.small (2 vCPUs, 2 GiB) leaves no whole CPU and GiB"),
    ("config: unknown training operator", _config("trainingOperator", "v3"), "eks-ddp:trainingOperator: 'v3' is not allowed; use one of v1, v2, none"),
    ("config: unknown autoscaler", _config("autoscaler", "keda"), "eks-ddp:autoscaler: 'keda' is not allowed; use one of cluster-autoscaler, karpenter, none"),
    ("config: misspelled region", lambda: parse(DEV, "us-eest-1"), "aws:region: 'us-eest-1' is not allowed; no AWS region of that name; did you mean us-west-1, us-east-1, us-west-2?"),
    ("config: zones of another region", lambda: parse(DEV, "us-west-2"), "eks-ddp:vpc.availabilityZones: 'us-east-1a' is not allowed; not a zone of aws:region us-west-2: use us-west-2a, us-west-2b, ..."),
    ("config: subnets in zones of another region", lambda: parse(stack_file.load("gpu")[0], "eu-west-1"), "eks-ddp:vpc.existingPrivateSubnetIds: 'us-east-1a' is not allowed; not a zone of aws:region eu-west-1"),
    ("config: unknown fabric check mode", _config("fabricCheck", "warn"), "eks-ddp:fabricCheck: 'warn' is not allowed; use one of gate, report, off"),
    ("config: a Karpenter-restricted node label", lambda: parse({**DEV, "autoscaler": "karpenter", "nodeGroups": [
        DEV["nodeGroups"][0], {**DEV["nodeGroups"][1], "labels": {"karpenter.sh/team": "a"}}]}, REGION),
     "eks-ddp:nodeGroups[1].labels: {'karpenter.sh/team': 'a'} is not allowed; label 'karpenter.sh/team' is restricted: Karpenter sets it"),
    ("config: elastic job without the v1 operator", _config("trainingOperator", "v2", elasticMinReplicas=1), "eks-ddp:job.elasticMinReplicas: 1 is not allowed; elastic jobs need trainingOperator v1 (PyTorchJob elasticPolicy), not v2"),
    ("config: negative node losses", _config("job.survivesNodeLosses", -1), "eks-ddp:job.survivesNodeLosses: -1 is not allowed; use 0 to 10"),
    # Zero, for every count a stack file sets that cannot be zero (where zero means something: ZERO_MEANS below;
    # test_every_count_key_has_its_zero_tried keeps the two lists whole).
    ("config: zero epochs", _config("job.epochs", 0), "eks-ddp:job.epochs: 0 is not allowed; use a whole number >= 1"),
    ("config: zero batch size", _config("job.batchSize", 0),
     "eks-ddp:job.batchSize: 0 is not allowed; use a whole number >= 1"),
    ("config: zero replicas", _config("job.replicas", 0),
     "eks-ddp:job.replicas: 0 is not allowed; use a whole number >= 1"),
    ("config: zero elastic minimum", _config("job.elasticMinReplicas", 0),
     "eks-ddp:job.elasticMinReplicas: 0 is not allowed; use 1 to replicas (2)"),
    ("config: zero maxSize", _config("nodeGroups.1.maxSize", 0),
     "eks-ddp:nodeGroups[1].maxSize: 0 is not allowed; use 1 or more"),
    ("config: zero root volume", _config("nodeGroups.1.rootVolumeGiB", 0),
     "eks-ddp:nodeGroups[1].rootVolumeGiB: 0 is not allowed; use 20 to 16384 GiB"),
    ("config: zero FSx capacity", _config("storage.capacityGiB", 0),
     "eks-ddp:storage.capacityGiB: 0 is not allowed; use 1200, 2400 or a multiple of 2400 GiB"),
    ("config: zero capacity of an existing FSx", _storage(GPU_EXISTING, capacityGiB=0),
     "eks-ddp:storage.capacityGiB: 0 is not allowed; use 1200, 2400 or a multiple of 2400 GiB"),
    ("config: zero FSx throughput", _storage(DEV, deploymentType="PERSISTENT_2", perUnitStorageThroughput=0),
     "eks-ddp:storage.perUnitStorageThroughput: 0 is not allowed; PERSISTENT_2 needs one of (125, 250, 500, 1000)"),
    ("config: data preparation without shared storage", _config("storage", {"kind": "none"}, prepareData=True), "eks-ddp:job.prepareData: True is not allowed; it fills the shared volume, and eks-ddp:storage is none"),
    ("workload: a job with neither a claim nor a bucket", _job(claim_name=None), "PyTorchJob: job.claim_name=None is not allowed; without a claim /shared is scratch space lost with the pod"),
    # Strict types: a string is not a boolean, a boolean is not a number.
    ("config: boolean written as a string", _config("nodeGroups.1.efa", "false"), "eks-ddp:nodeGroups[1].efa: 'false' is not allowed; give true or false (unquoted)"),
    ("config: number written as a string", _config("job.epochs", "10"), "eks-ddp:job.epochs: '10' is not allowed; give a whole number"),
    ("config: boolean for a number", _config("nodeGroups.1.maxSize", True), "eks-ddp:nodeGroups[1].maxSize: True is not allowed; give a whole number"),
    ("config: label value not a string", _config("nodeGroups.1.labels", {"tier": 1}), "eks-ddp:nodeGroups[1].labels.tier: 1 is not allowed; give a string"),
    ("config: misspelt key, with the closest", _config("nodeGroups.1.desiredsize", 2), "eks-ddp:nodeGroups[1].desiredsize: 2 is not allowed; known keys are availabilityZone"),
    # The stack file, as the Pulumi CLI checks it against Pulumi.yaml's config schema.
    ("config: undeclared key in the stack file", _stack_file("eks-ddp:storgae: {kind: efs}"), "Stack 'scratch' sets eks-ddp:storgae, which Pulumi.yaml does not declare (did you mean storage?)"),
    ("config: declared type in the stack file", _stack_file("eks-ddp:ncclCheck: 'yes'"), "Stack 'scratch' with configuration key 'eks-ddp:ncclCheck' must be of type 'boolean'"),
    # Component arguments: errors name the component and the argument.
    ("component: Kubernetes version 1.x", _component(lambda: Cluster("c", {"vpc_id": "v", "private_subnet_ids": [], "kubernetes_version": "1.x"})), "Cluster: kubernetes_version='1.x' is not allowed; use one of 1.34, 1.35"),
    ("component: one availability zone", _component(lambda: Network("n", {"availability_zones": ["us-east-1a"]})), "Network: availability_zones=['us-east-1a'] is not allowed; name at least 2 distinct zones"),
    ("component: CIDR too small for the subnets", _component(lambda: Network("n", {"cidr": "10.0.0.0/24", "availability_zone_count": 5})), "Network: cidr='10.0.0.0/24' is not allowed; too small for 10 subnets"),
    ("component: EFA on a type without it", _component(lambda: EfaNodeGroup("g", {**GROUP, "instance_type": "t4g.large"})), "EfaNodeGroup: efa=True is not allowed; t4g.large does not support EFA"),  # type: ignore[typeddict-item]
    ("component: capacity block without reservation", _component(lambda: EfaNodeGroup("g", {**GROUP, "capacity_type": "CAPACITY_BLOCK"})), "EfaNodeGroup: capacity_reservation_id=None is not allowed; a CAPACITY_BLOCK group needs"),  # type: ignore[typeddict-item]
    ("component: metadata open to pods", _component(lambda: EfaNodeGroup("g", {**GROUP, "metadata_hop_limit": 0})), "EfaNodeGroup: metadata_hop_limit=0 is not allowed"),  # type: ignore[typeddict-item]
    ("component: FSx PERSISTENT_2 without throughput", _component(lambda: FsxLustreStorage("f", {"provider": k8s.Provider("k", kubeconfig="{}"), "vpc_id": "v", "subnet_id": "s", "node_security_group_id": "g", "namespace": "t", "deployment_type": "PERSISTENT_2", **OIDC})), "FsxLustreStorage: per_unit_storage_throughput=None is not allowed"),  # type: ignore[typeddict-item]
    ("component: node group zone outside the network", _component(lambda: TrainingPlatform("p", {"network": {"availability_zones": ["us-east-1a", "us-east-1b"]}, "node_groups": [{"name": "w", "instance_type": "c7g.16xlarge", "availability_zone": "us-east-1f"}]})), "TrainingPlatform: node_groups[0].availability_zone='us-east-1f' is not allowed; use one of the network's zones"),
    ("component: admin that is not an IAM ARN", _component(lambda: Cluster("c", {"vpc_id": "v", "private_subnet_ids": [], "admin_principal_arns": ["alice"]})), "Cluster: admin_principal_arns='alice' is not allowed"),
    # Workload arguments.
    ("workload: job name not DNS-1035", _job(name="Train_1"), "PyTorchJob: job.name='Train_1' is not allowed; must be a DNS-1035 label"),
    ("workload: more pods than the group's nodes", _job(replicas=3), "PyTorchJob: job.replicas=3 is not allowed; the node group holds at most 2 pods, one per node"),
    ("workload: zero epochs", _job(epochs=0), "PyTorchJob: job.epochs=0 is not allowed; use a whole number >= 1"),
    ("workload: elastic minimum above the maximum", _job(elastic_min_replicas=5), "PyTorchJob: job.elastic_min_replicas=5 is not allowed"),
    # Trainer command line.
    ("trainer: batch size 0", _trainer("--batch-size", "0"), "argument --batch-size: 0 is not allowed (must be >= 1)"),
    ("trainer: negative epochs", _trainer("--epochs", "-1"), "argument --epochs: -1 is not allowed (must be >= 1)"),
    ("trainer: unknown dataset", _trainer("--dataset", "imagenet"), "argument --dataset: invalid choice: 'imagenet'"),
    ("trainer: missing data directory", _trainer("--dataset", "cifar10", "--data-dir", "/nonexistent/cifar"), "--data-dir /nonexistent/cifar: no such directory"),
    ("trainer: zero learning rate", _trainer("--lr", "0"), "argument --lr: 0 is not allowed (must be > 0)"),
    ("trainer: warm-up of the whole run", _trainer("--warmup-fraction", "1"), "argument --warmup-fraction: 1 is not allowed (must be >= 0 and < 1)"),
]


@pytest.mark.parametrize(("case", "attempt", "message"), CASES, ids=[case[0] for case in CASES])
def test_bad_input_fails_first_and_says_why(pulumi_mocks: Recorded, capsys: pytest.CaptureFixture[str], case: str, attempt: Callable[[], object], message: str) -> None:
    def program() -> None:
        if case.startswith("trainer"):
            try:
                code = attempt()
            except SystemExit as exit_:  # argparse rejects flags by exiting
                code = exit_.code
            assert code == 2
            return
        with pytest.raises((ConfigError, InvalidArgument, StackFileError)) as raised:
            attempt()
        assert message in str(raised.value), str(raised.value)
        if case.startswith("config"):  # a stack key's message speaks the stack file's words, not the Python names
            allowed = re.sub(r"'[^']*'", "", str(raised.value).partition(" is not allowed")[2])  # values as written
            assert not re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", allowed), allowed

    pulumi_mocks.run(program)
    if case.startswith("trainer"):
        error = capsys.readouterr().err
        assert message in error and error.count("\n") == 1, error
    created = [r for r in pulumi_mocks.monitor.registrations if r.type != "pulumi:providers:kubernetes" and not (case.startswith("workload") and r.name.startswith("workers"))]
    assert created == [], [r.name for r in created]


def _workers(**keys: object) -> Callable[[Any], None]:
    return lambda values: values["nodeGroups"][1].update(keys)


def _workers_shape(config: StackConfig) -> dict[str, Any]:
    return dict(config.platform.get("node_groups", [])[0])


BORROWS_ONLY = {"team-a": {"workers": {"cpu": "0"}}}
"""A team guaranteed no CPU, which borrows what the other teams leave unused (Pulumi.yaml, eks-ddp:queueQuotas)."""
ZERO_MEANS: list[tuple[str, Callable[[Any], None], Callable[[StackConfig], bool]]] = [
    # (the stack key, the dev stack with it at zero, what the parsed config must then say). Zero node losses
    # fail the job at its first event: what each operator renders for it is in tests/workloads/test_restart_budgets.py.
    ("eks-ddp:job.survivesNodeLosses", lambda values: values["job"].update(survivesNodeLosses=0),
     lambda config: config.job is not None and config.job.spec.get("node_losses") == 0),
    ("eks-ddp:nodeGroups[1].minSize", _workers(minSize=0),
     lambda config: _workers_shape(config).get("min_size") == 0),  # the autoscaler may take every node away
    ("eks-ddp:nodeGroups[1].desiredSize", _workers(minSize=0, desiredSize=0),
     lambda config: _workers_shape(config).get("desired_size") == 0),  # no node until a pod needs one
    ("eks-ddp:checkpointExpiryDays", lambda values: values.update(checkpointExpiryDays=0),
     lambda config: "checkpoint_expiry_days" not in config.platform),  # keeps checkpoints (Pulumi.yaml)
    ("eks-ddp:queueQuotas", lambda values: values.update(queueing="kueue", queueQuotas=BORROWS_ONLY),
     lambda config: dict(config.platform.get("queueing") or {}).get("quotas") == BORROWS_ONLY),
]


@pytest.mark.parametrize("autoscaler", ["cluster-autoscaler", "karpenter"])
@pytest.mark.parametrize(("key", "change", "means"), ZERO_MEANS, ids=[case[0] for case in ZERO_MEANS])
def test_a_zero_that_means_something_is_taken_as_written(
    key: str, change: Callable[[Any], None], means: Callable[[StackConfig], bool], autoscaler: str
) -> None:
    """Under either autoscaler; Karpenter keeps no idle node, whatever the sizes (infra/addons/karpenter_nodes.py)."""
    values: Any = {**copy.deepcopy(DEV), "autoscaler": autoscaler}
    change(values)
    assert means(parse(values, REGION)), key


def test_every_count_key_has_its_zero_tried() -> None:
    """Each whole-number key of the stack file is refused at zero in CASES or taken as written in ZERO_MEANS."""
    where = {"nodeGroups[0].": SYSTEM, "nodeGroups[1].": NODE_GROUP, "nodeGroups[1].taints[0].": TAINT,
             "storage.": STORAGE, "job.": JOB, "vpc.": VPC, "existingCluster.": EXISTING_CLUSTER, "addons.": ADDONS}
    declared = [value for value in vars(sections).values() if isinstance(value, Section)]
    assert sorted(map(id, where.values())) == sorted(map(id, declared))  # a new section says where its keys sit
    tables = {"": top_level(), **{at: section.fields() for at, section in where.items()}}
    counts = {f"eks-ddp:{at}{key}" for at, table in tables.items() for key, (_, kind) in table.items() if kind is int}
    refused = {message.partition(": 0 is not allowed")[0] for _, _, message in CASES if ": 0 is not allowed" in message}
    assert counts - refused - {key for key, _, _ in ZERO_MEANS} == set()


def test_the_matrix_is_broad() -> None:
    layers = {case.split(":")[0] for case, _, _ in CASES}
    assert len(CASES) >= 30 and layers == {"config", "component", "workload", "trainer"}


# The commands a user types, each with each kind of bad input: one line on stderr naming the file or key, the value
# and what is allowed, and a non-zero exit. `make demo`, `make preview` and `make rehearse` run these modules' main.
BROKEN_YAML = "config:\n  aws:region: us-east-1\n  eks-ddp:job:\n    epochs: 2\n   replicas: 2\n"
USERS_PROGRAM = (
    "import pulumi\n\n"
    "config = pulumi.Config()\n"
    "pulumi.export('image', config.require('image'))\n"
    "pulumi.export('count', config.require_int('count'))\n"
)


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """eks-ddp's program with broken stack files beside it, and a user's program whose stack file lacks a key."""
    ours = tmp_path_factory.mktemp("ours")
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(stack_file.ROOT / name, ours / name)
    (ours / "Pulumi.broken.yaml").write_text(BROKEN_YAML)
    (ours / "Pulumi.list.yaml").write_text("- aws:region: us-east-1\n")
    (ours / "Pulumi.dev.yaml").write_text((stack_file.ROOT / "Pulumi.dev.yaml").read_text())
    bad_project = tmp_path_factory.mktemp("bad-project")
    (bad_project / "Pulumi.yaml").write_text("name: x\nruntime: python\nconfig:\n  a: 1\n b: 2\n")
    (bad_project / "Pulumi.dev.yaml").write_text("config: {}\n")
    (bad_project / "__main__.py").write_text("")
    users = tmp_path_factory.mktemp("users")
    (users / "Pulumi.yaml").write_text("name: mine\nruntime: python\n")
    (users / "__main__.py").write_text(USERS_PROGRAM)
    (users / "Pulumi.prod.yaml").write_text("config:\n  aws:region: us-east-1\n")
    (users / "Pulumi.typed.yaml").write_text("config:\n  aws:region: us-east-1\n  mine:image: i\n  mine:count: many\n")
    return {"ours": ours, "bad-project": bad_project, "users": users}


def _main(tool: str) -> Callable[[list[str]], int]:
    from eks_ddp.tools import local, preview, rehearsal

    return {"demo": local.main, "preview": preview.main, "rehearse": rehearsal.main}[tool]


def _where(tool: str, program: str) -> list[str]:
    """The flag that points each command at a program's directory."""
    return ["--project-dir" if tool == "demo" else "--program", f"{{{program}}}"]


DEMO_PREVIEW = ("demo", "preview")
TOOL_CASES: list[tuple[str, str, list[str], str]] = [
    *[(tool, "stack file: YAML indentation", [*_where(tool, "ours"), "--stack", "broken"],
       "{ours}/Pulumi.broken.yaml:5:4: not valid YAML: did not find expected key") for tool in DEMO_PREVIEW],
    ("rehearse", "stack file: YAML indentation", [*_where("rehearse", "ours"), "--stack", "broken"],
     "{ours}/Pulumi.broken.yaml:5:4: not valid YAML: did not find expected key"),
    *[(tool, "stack file: not a map", [*_where(tool, "ours"), "--stack", "list"],
       "{ours}/Pulumi.list.yaml: a list is not allowed; a stack file is a map with a config: map") for tool in DEMO_PREVIEW],
    *[(tool, "Pulumi.yaml: YAML indentation", [*_where(tool, "bad-project"), "--stack", "dev"],
       "{bad-project}/Pulumi.yaml:5:2: not valid YAML") for tool in (*DEMO_PREVIEW, "rehearse")],
    *[(tool, "CONFIG: a number in words", ["--config", "eks-ddp:job.replicas=two"],
       "error: eks-ddp:job.replicas: 'two' is not allowed; give a whole number") for tool in DEMO_PREVIEW],
    *[(tool, "CONFIG: no namespace", ["--config", "replicas=2"],
       "error: --config 'replicas=2' is not allowed; give NAMESPACE:KEY=VALUE") for tool in DEMO_PREVIEW],
    *[(tool, "CONFIG: a misspelt key", ["--config", "eks-ddp:jbo.replicas=3"],
       "error: --config eks-ddp:jbo.replicas=3: eks-ddp:jbo is not allowed; Pulumi.yaml does not declare it "
       "(did you mean job?)") for tool in DEMO_PREVIEW],
    *[(tool, "CONFIG: a declared type", ["--config", "eks-ddp:ncclCheck=yes"],
       "error: --config eks-ddp:ncclCheck=yes: 'yes' is not allowed; eks-ddp:ncclCheck must be of type 'boolean'")
      for tool in DEMO_PREVIEW],
    *[(tool, "CONFIG: a path into a string", ["--config", "eks-ddp:image.tag=1"],
       "error: --config: eks-ddp:image.tag=1: 'tag' does not fit: not a map") for tool in DEMO_PREVIEW],
    *[(tool, "flag: no such stack", ["--stack", "nope"], "error: --stack nope: Pulumi.nope.yaml not found")
      for tool in (*DEMO_PREVIEW, "rehearse")],
    *[(tool, "flag: misspelt", ["--stak", "dev"], "error: unrecognized arguments: --stak dev")
      for tool in (*DEMO_PREVIEW, "rehearse")],
    ("rehearse", "flag: not a date", ["--on", "2026-13-01"],
     "error: argument --on: '2026-13-01' is not allowed; give a date as YYYY-MM-DD"),
    *[(tool, "program: no such directory", ["--program", "{ours}/nowhere"],
       "error: --program {ours}/nowhere: no Pulumi.yaml there") for tool in ("preview", "rehearse")],
    *[(tool, "program config: a required key missing", [*_where(tool, "users"), "--stack", "prod"],
       "{users}/Pulumi.prod.yaml: mine:image is not set, and the program requires it") for tool in ("preview", "rehearse")],
    *[(tool, "program config: a value of another type", [*_where(tool, "users"), "--stack", "typed"],
       "{users}/Pulumi.typed.yaml: mine:count: 'many' is not allowed; the program reads it as int")
      for tool in ("preview", "rehearse")],
]


@pytest.mark.parametrize(("tool", "case", "argv", "message"), TOOL_CASES, ids=[f"{c[0]}: {c[1]}" for c in TOOL_CASES])
def test_each_command_refuses_bad_input_in_one_line(
    programs: dict[str, Path], capsys: pytest.CaptureFixture[str], tool: str, case: str, argv: list[str], message: str
) -> None:
    """`make rehearse` goes on to the next stack file: its one line is that stack's finding, on stdout."""
    argv = [argument.format_map(programs) for argument in argv]
    try:
        code = _main(tool)([*argv, "--workdir", str(programs["ours"] / "work")] if tool == "demo" else argv)
    except SystemExit as exit_:  # argparse refuses flags by exiting
        code = exit_.code
    captured = capsys.readouterr()
    expected = message.format_map(programs)
    if tool == "rehearse" and case.startswith(("stack file", "program config")):
        assert code == 1 and captured.out.count("\n") == 1 and expected in captured.out, captured
    else:
        assert code == 2 and captured.err.count("\n") == 1 and expected in captured.err, captured
        assert captured.out == ""
    assert not (programs["ours"] / "work").exists()


def test_make_rehearse_goes_on_past_a_stack_file_it_cannot_read(
    programs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Each broken stack file is its own finding and its own summary line; the next one is still rehearsed."""
    from eks_ddp.tools import rehearsal

    assert rehearsal.main(["--program", str(programs["ours"]), "--stack", "broken", "--stack", "list"]) == 1
    captured = capsys.readouterr()
    assert [line.split(": ")[0:2] for line in captured.out.splitlines()] == [["broken", "config"], ["list", "config"]]
    summaries = captured.err.splitlines()
    assert [line.split(":")[0] for line in summaries] == ["eks-ddp broken", "eks-ddp list"], summaries
    assert all("its config is refused" in line for line in summaries)
