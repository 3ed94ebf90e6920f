import pytest

from eks_ddp.infra.addons.training_operator import OperatorKind
from eks_ddp.infra.aws.efa_node_group import TaintEffect
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.platform import AutoscalerKind, StorageKind, TrainingPlatform, TrainingPlatformArgs, validate
from tests.pulumi_harness import Recorded


def _args(**overrides: object) -> TrainingPlatformArgs:
    """The Graviton workshop's shape."""
    args: dict[str, object] = {
        "network": {"cidr": "10.0.0.0/16", "availability_zones": ["us-east-1a", "us-east-1b"]},
        "node_groups": [{
            "name": "workers", "instance_type": "c7g.16xlarge", "availability_zone": "us-east-1a", "efa": True,
            "min_size": 1, "max_size": 6, "desired_size": 2, "taints": [{"key": "training", "value": "true", "effect": TaintEffect.NO_SCHEDULE}],
        }],
        "storage": StorageKind.FSX,
        "fsx": {"deployment_type": "SCRATCH_2", "capacity_gib": 1200},
        "tags": {"project": "eks-ddp"},
    }
    args.update(overrides)
    return args  # type: ignore[return-value]


def _ancestors(recorded: Recorded, urn: str) -> list[str]:
    chain = []
    while urn:
        registration = next((r for r in recorded.monitor.registrations if r.urn == urn), None)
        if registration is None:
            break
        chain.append(registration.type)
        urn = registration.parent
    return chain


def _waited_for(recorded: Recorded, urn: str) -> set[str]:
    """Everything a resource waits for, directly or through what it waits for."""
    by_urn = {r.urn: r for r in recorded.monitor.registrations}
    seen: set[str] = set()
    todo = list(by_urn[urn].dependencies)
    while todo:
        dependency = todo.pop()
        if dependency not in seen:
            seen.add(dependency)
            todo.extend(by_urn[dependency].dependencies if dependency in by_urn else [])
    return seen


def test_workshop_shape_composes_every_component(pulumi_mocks: Recorded) -> None:
    platforms: list[TrainingPlatform] = []
    pulumi_mocks.run(lambda: platforms.append(TrainingPlatform("ddp", _args())))
    platform = platforms[0]
    components = sorted(r.type.split(":")[-1] for r in pulumi_mocks.monitor.registrations if r.type.startswith("eksddp:index:"))
    assert components == sorted([
        "TrainingPlatform", "Network", "Cluster", "EfaNodeGroup", "EfaDevicePlugin", "ClusterAutoscaler",
        "MetricsServer", "TrainingOperator", "FsxLustreStorage", "ModelBucket",
    ])
    everything_else = [r for r in pulumi_mocks.monitor.registrations if r.type not in ("eksddp:index:TrainingPlatform",)]
    assert all("eksddp:index:TrainingPlatform" in _ancestors(pulumi_mocks, r.parent) for r in everything_else)

    subnet_a = "subnet-ddp-network-private-0"  # the mock's id for the us-east-1a private subnet
    assert pulumi_mocks.named("ddp-workers-nodes").inputs["subnetIds"] == [subnet_a]
    (storage_class,) = pulumi_mocks.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    assert storage_class.inputs["parameters"]["subnetId"] == subnet_a
    assert pulumi_mocks.named("ddp-namespace").inputs["metadata"]["labels"] == {
        "purpose": "distributed-training",
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }
    plugin = pulumi_mocks.named("ddp-efa-device-plugin-chart")
    assert plugin.inputs["values"]["tolerations"] == [{"key": "training", "operator": "Exists", "effect": "NoSchedule"}]
    assert pulumi_mocks.named("ddp-cluster-system").urn in plugin.dependencies
    assert platform.node_groups["workers"].efa_interfaces == 1 and platform.storage_claim_name == "shared"
    assert platform.service_account_name == "trainer" and platform.training_namespace == "training"
    tagged = [r for r in pulumi_mocks.monitor.registrations if r.type.startswith("aws:") and isinstance(r.inputs.get("tags"), dict)]
    assert tagged and all(r.inputs["tags"].get("project") == "eks-ddp" for r in tagged)


def test_add_ons_can_be_turned_off(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: TrainingPlatform("ddp", _args(
        storage=StorageKind.NONE, model_bucket=False, autoscaler=AutoscalerKind.NONE, metrics_server=False, training_operator=OperatorKind.NONE, efa_device_plugin=False,
    )))
    components = {r.type.split(":")[-1] for r in pulumi_mocks.monitor.registrations if r.type.startswith("eksddp:index:")}
    assert components == {"TrainingPlatform", "Network", "Cluster", "EfaNodeGroup"}


def test_efs_gets_a_mount_target_per_zone(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: TrainingPlatform("ddp", _args(storage=StorageKind.EFS)))
    assert len(pulumi_mocks.of_type("aws:efs/mountTarget:MountTarget")) == 2


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"node_groups": [{"name": "workers", "instance_type": "c7g.16xlarge", "availability_zone": "us-east-1c"}]},
         "node_groups[0].availability_zone='us-east-1c' is not allowed; use one of the network's zones: us-east-1a, us-east-1b"),
        ({"node_groups": [{"name": "Workers", "instance_type": "c7g.16xlarge", "availability_zone": "us-east-1a"}]}, "node_groups[0].name='Workers' is not allowed"),
        ({"node_groups": [{"name": "system", "instance_type": "c7g.16xlarge", "availability_zone": "us-east-1a"}]}, "not `system`"),
        ({"network": {"availability_zone_count": 2}}, "network.availability_zones=None is not allowed; name the zones"),
        ({"storage": "lustre"}, "storage='lustre' is not allowed"),
        ({"network": {"existing_vpc_id": "vpc-1", "existing_private_subnet_ids": {}}, "node_groups": [], "storage": StorageKind.EFS},
         "existing_private_subnet_ids={} is not allowed"),
        ({"network": {"availability_zone_count": 2}, "node_groups": [], "storage": StorageKind.EFS}, "name the zones so EFS gets a mount target in each"),
        ({"node_groups": [{"name": "a", "instance_type": "c7g.16xlarge", "availability_zone": "us-east-1a"}] * 2}, "node_groups[1].name='a' is not allowed; names must be unique"),
        ({"fsx": {"capacity_gib": 1000}}, "FsxLustreStorage: capacity_gib=1000 is not allowed"),
        ({"node_groups": [], "storage": StorageKind.FSX}, "fsx lives in a node group's zone"),
        ({"network": {"cidr": "10.0.0.0/8", "availability_zones": ["us-east-1a", "us-east-1b"]}}, "Network: cidr='10.0.0.0/8' is not allowed"),
        ({"training_namespace": "Training"}, "training_namespace='Training' is not allowed"),
    ],
)
def test_invalid_platform_arguments_are_refused_before_anything_exists(pulumi_mocks: Recorded, overrides: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        TrainingPlatform("ddp", _args(**overrides))
    assert message in str(raised.value)
    assert pulumi_mocks.monitor.registrations == []


@pytest.mark.parametrize("monitoring", ["prometheus", "none"])
def test_what_runs_on_the_cluster_waits_for_the_nodes_and_the_namespace_it_needs(pulumi_mocks: Recorded, monitoring: str) -> None:
    """`opts.depends_on` reaches each component's own resources: every chart waits for the system nodes that run it,
    the claim (through its storage class and CSI driver) for the namespace it lives in, the node pool for Karpenter's CRDs."""
    pulumi_mocks.run(lambda: TrainingPlatform("ddp", _args(monitoring=monitoring, autoscaler=AutoscalerKind.KARPENTER)))
    system, namespace = pulumi_mocks.named("ddp-cluster-system").urn, pulumi_mocks.named("ddp-namespace").urn
    releases = pulumi_mocks.of_type("kubernetes:helm.sh/v3:Release")
    assert len(releases) >= 4
    waiting = [r.name for r in releases if system in r.dependencies or any(
        d in r.dependencies for d in [x.urn for x in releases]  # a chart that waits for another chart (its CRDs)
    )]
    assert sorted(waiting) == sorted(r.name for r in releases)
    (claim,) = pulumi_mocks.of_type("kubernetes:core/v1:PersistentVolumeClaim")
    assert namespace in _waited_for(pulumi_mocks, claim.urn)
    karpenter = pulumi_mocks.named("ddp-karpenter-chart").urn
    node_classes = pulumi_mocks.of_type("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
    assert node_classes and all(karpenter in r.dependencies for r in node_classes)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"node_groups": [{"name": "workers", "instance_typ": "c7g.16xlarge"}]},
            "TrainingPlatform: node_groups[0].instance_typ='c7g.16xlarge' is not allowed; NodeGroupShape has no such "
            "key; did you mean instance_type?",
        ),
        (
            {"depends_on": []},
            "TrainingPlatform: depends_on=[] is not allowed; TrainingPlatformArgs has no such key; removed in 0.3.0",
        ),
    ],
)
def test_a_key_the_platform_does_not_take_is_refused_by_name(args: dict, message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        validate("ddp", args)  # type: ignore[arg-type]
    assert str(raised.value).startswith(message)
