"""TrainingPlatform: network, cluster, node groups, add-ons, storage and bucket from one args dict."""

import json
import re
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import Any, NotRequired, TypedDict, cast

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from eks_ddp.infra.addons.cloudwatch_observability import CloudWatchObservability
from eks_ddp.infra.addons.cluster_autoscaler import ClusterAutoscaler
from eks_ddp.infra.addons.efa_device_plugin import EfaDevicePlugin
from eks_ddp.infra.addons.helm import POD_SECURITY, tolerations
from eks_ddp.infra.addons import kueue
from eks_ddp.infra.addons.karpenter import Karpenter
from eks_ddp.infra.addons.kueue import Kueue, KueueArgs, QueueingArgs
from eks_ddp.infra.addons.karpenter_nodes import KarpenterNodePool, KarpenterNodePoolArgs
from eks_ddp.infra.addons.karpenter_nodes import validate as validate_karpenter_shape
from eks_ddp.infra.addons.kubeflow_trainer import KubeflowTrainer, KubeflowTrainerArgs
from eks_ddp.infra.addons.metrics_server import MetricsServer
from eks_ddp.infra.addons.mpi_operator import MpiOperator, MpiOperatorArgs
from eks_ddp.infra.addons.node_quarantine import NodeQuarantine
from eks_ddp.infra.addons.neuron_device_plugin import NeuronDevicePlugin
from eks_ddp.infra.addons.nvidia_device_plugin import NvidiaDevicePlugin
from eks_ddp.infra.addons.prometheus_monitoring import PrometheusMonitoring
from eks_ddp.infra.addons.training_operator import OperatorKind, TrainingOperator, TrainingOperatorArgs
from eks_ddp.infra.args import check_keys
from eks_ddp.infra.aws.cluster import (
    DEFAULT_SYSTEM_INSTANCE_TYPE,
    GROUP_LABEL,
    SYSTEM_LABEL,
    Cluster,
    ClusterArgs,
    ClusterOptions,
)
from eks_ddp.infra.aws.cluster import validate as validate_cluster
from eks_ddp.infra.aws.efa_node_group import (
    EfaNodeGroup,
    EfaNodeGroupArgs,
    NodeGroupShape,
    Taint,
    TrainingNodes,
    sizes,
    validate_shape,
)
from eks_ddp.infra.aws.iam import RoleAccess, role_access
from eks_ddp.infra.aws.model_bucket import DEFAULT_SERVICE_ACCOUNT, ModelBucket
from eks_ddp.infra.aws.model_bucket import validate as validate_bucket
from eks_ddp.infra.aws.network import Network, NetworkArgs
from eks_ddp.infra.aws.network import validate as validate_network
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.existing_cluster import (
    ClusterFacts,
    ExistingClusterArgs,
    ExistingNodeGroup,
    aws_side_problem,
    eks_facts,
    facts_for,
)
from eks_ddp.infra.existing_cluster import provider as existing_provider
from eks_ddp.infra.existing_cluster import validate as validate_existing_cluster
from eks_ddp.infra.facts import instance_facts, versions
from eks_ddp.infra.facts.allocatable import NodeLauncher
from eks_ddp.infra.facts.catalogue import InstanceType
from eks_ddp.infra.storage.efs import EfsStorage, EfsStorageArgs
from eks_ddp.infra.storage.existing_fsx import (
    ExistingFsxOptions,
    ExistingFsxVolume,
    ExistingFsxVolumeArgs,
)
from eks_ddp.infra.storage.existing_fsx import validate as validate_existing_fsx
from eks_ddp.infra.storage.fsx import FsxLustreStorage, FsxLustreStorageArgs, FsxOptions
from eks_ddp.infra.storage.fsx import validate as validate_fsx

COMPONENT = "TrainingPlatform"
NODE_AGENT = "eks-node-monitoring-agent"
TRAINING_LABELS = {
    "purpose": "distributed-training",
    # Pod Security Admission: enforce baseline, because some containers need more than restricted allows (the claim's
    # root permissions step, with CHOWN and DAC_OVERRIDE, the GPU pre-flight's DCGM, and the NCCL check's sshd and
    # mpirun, all root); warn and audit at restricted, so any other pod that falls short of it is named
    # (workloads/security.py; tests/cluster/test_pod_security_on_engines.py asks the API server itself).
    **POD_SECURITY,
}


class StorageKind(str, Enum):
    """The shared file system jobs mount at /shared."""

    FSX = "fsx"
    """A new FSx for Lustre file system in the first node group's zone."""
    EXISTING_FSX = "existing-fsx"
    """An FSx for Lustre file system that exists already (`existing_fsx`)."""
    EFS = "efs"
    """A new EFS file system with a mount target in each zone."""
    NONE = "none"
    """No shared file system: results and checkpoints go to the model bucket."""


class AutoscalerKind(str, Enum):
    """What adds training nodes: the Cluster Autoscaler on managed node groups (the workshops'), Karpenter on
    node pools (nodes shaped per pod, EFA per card, interruption handling), or nothing (fixed groups)."""

    CLUSTER_AUTOSCALER = "cluster-autoscaler"
    """The Cluster Autoscaler on EKS managed node groups."""
    KARPENTER = "karpenter"
    """Karpenter, with an EC2NodeClass and a NodePool per training group."""
    NONE = "none"
    """Fixed managed node groups."""


class MonitoringKind(str, Enum):
    """How training is watched: Prometheus and Grafana in the cluster, CloudWatch Container Insights, or neither."""

    NONE = "none"
    """Nothing installed."""
    PROMETHEUS = "prometheus"
    """kube-prometheus-stack with Grafana, the dashboards, and the GPU and EFA exporters."""
    CLOUDWATCH = "cloudwatch"
    """The amazon-cloudwatch-observability add-on (Container Insights)."""


class TrainingPlatformArgs(TypedDict):
    existing_cluster: NotRequired[ExistingClusterArgs]
    """Deploy onto a cluster made elsewhere: no VPC, cluster or node groups are made, and `node_groups` describe the
    cluster's own groups (infra/existing_cluster.py)."""
    network: NotRequired[NetworkArgs]
    """The VPC (default: a new 10.0.0.0/16 VPC; name the zones when node groups pick one)."""
    cluster_name: NotRequired[str]
    """EKS cluster name (default: the component's name)."""
    kubernetes_version: NotRequired[str]
    """Kubernetes minor version (default infra.facts.versions.DEFAULT_KUBERNETES_VERSION)."""
    admin_principal_arns: NotRequired[Sequence[str]]
    """IAM principals given cluster-admin."""
    private_endpoint_only: NotRequired[bool]
    """API endpoint only inside the VPC."""
    system_instance_type: NotRequired[str]
    """Instance type of the system node group, any architecture (default m7g.large)."""
    system_node_count: NotRequired[int]
    """System nodes (default 2)."""
    node_groups: NotRequired[Sequence[NodeGroupShape]]
    """Training node groups, each with a `name`."""
    training_namespace: NotRequired[str]
    """Namespace for training workloads (default `training`)."""
    storage: NotRequired[StorageKind]
    """Shared file system: fsx (default, a new one), existing-fsx, efs or none."""
    fsx: NotRequired[FsxOptions]
    """FSx for Lustre settings, with storage fsx."""
    existing_fsx: NotRequired[ExistingFsxOptions]
    """The file system to mount, with storage existing-fsx."""
    model_bucket: NotRequired[bool]
    """S3 bucket for models and checkpoints with its role (default true)."""
    service_account_roles: NotRequired[RoleAccess]
    """How the model bucket's, Karpenter's and the Cluster Autoscaler's service accounts get their IAM roles:
    pod-identity (default, EKS Pod Identity) or irsa."""
    checkpoint_expiry_days: NotRequired[int]
    """Expire `checkpoints/` objects in the bucket after this many days."""
    autoscaler: NotRequired[AutoscalerKind]
    """What launches training nodes (default cluster-autoscaler: managed node groups; karpenter: node pools)."""
    metrics_server: NotRequired[bool]
    """Install metrics-server (default true)."""
    monitoring: NotRequired[MonitoringKind]
    """none (default), prometheus (kube-prometheus-stack, Grafana dashboards, GPU and EFA exporters) or cloudwatch."""
    efa_exporter_image: NotRequired[str]
    """With prometheus: AWS's EFA node exporter image for the EFA counters (none is published; build it)."""
    managed_prometheus: NotRequired[bool]
    """With prometheus: also remote-write to a new Amazon Managed Service for Prometheus workspace."""
    node_health: NotRequired[bool]
    """The EKS node monitoring agent, node auto-repair of the training nodes, and the right for GPU pods whose
    pre-flight fails to taint their own node (NodeQuarantine) (default true)."""
    karpenter_node_repair: NotRequired[bool]
    """With Karpenter: let it replace nodes the node monitoring agent reports unhealthy (its alpha `nodeRepair` gate;
    default false: it terminates the node without a drain, so the training pods get no SIGTERM checkpoint)."""
    fsx_csi_driver: NotRequired[bool]
    """With storage existing-fsx: install the FSx for Lustre CSI driver (default true; false where the cluster runs it
    already)."""
    efa_device_plugin: NotRequired[bool]
    """Install the EFA device plugin (default true when a group has EFA)."""
    nvidia_device_plugin: NotRequired[bool]
    """Install the NVIDIA device plugin (default true when a group has NVIDIA GPUs)."""
    neuron_device_plugin: NotRequired[bool]
    """Install the Neuron device plugin (default true when a group has AWS Trainium or Inferentia devices)."""
    training_operator: NotRequired[OperatorKind]
    """What runs training jobs (default v1: the training operator; v2: Kubeflow Trainer; none: nothing installed)."""
    addon_sources: NotRequired[Mapping[str, str]]
    """Add-ons to install from local files instead of their registries (air-gapped clusters, the local cluster):
    `training_operator`, a kustomization (TrainingOperatorArgs.directory); `kubeflow_trainer`, the chart's folder
    (KubeflowTrainerArgs.chart_folder); `mpi_operator`, the release's manifest; `kueue`, the chart's folder
    (KueueArgs.chart_folder)."""
    mpi_operator: NotRequired[bool]
    """Install the MPI operator v2 for MPIJobs (default true when a GPU group has EFA: the NCCL check)."""
    queueing: NotRequired[QueueingArgs]
    """Share the groups through Kueue: queues with quotas, gang admission, placement on EC2's network
    (infra.addons.kueue); absent, a job starts as soon as it is created. Queued jobs carry `submission(group)`."""
    tags: NotRequired[dict[str, str]]
    """Tags for every taggable resource."""


class QueuedJobSpec(TypedDict):
    """The fields of a TrainingJobSpec that queue it (TrainingPlatform.submission)."""

    queue: NotRequired[str]
    queue_placement: NotRequired[str]


CLUSTER_OPTIONS = (
    "cluster_name",
    "kubernetes_version",
    "admin_principal_arns",
    "private_endpoint_only",
    "system_instance_type",
    "system_node_count",
)


def validate(
    name: str, args: TrainingPlatformArgs, describe: Callable[[str], InstanceType] = instance_facts.describe
) -> None:
    """Every check of every child component, so bad arguments fail before any resource is registered.

    `describe` gives an instance type's facts: EC2's in a Pulumi program, the catalogue's offline.
    """
    check_keys(COMPONENT, "", args, TrainingPlatformArgs)
    for index, group in enumerate(args.get("node_groups", [])):
        check_keys(COMPONENT, f"node_groups[{index}].", group, NodeGroupShape)
    existing = args.get("existing_cluster")
    if existing is not None:
        _validate_existing(args, existing)
        describe = facts_for(existing, describe)
    network = args.get("network", {})
    validate_network(network)
    operators = [kind.value for kind in OperatorKind]
    if args.get("training_operator", OperatorKind.V1) not in operators:
        raise InvalidArgument(
            COMPONENT, "training_operator", args.get("training_operator"), f"use one of {', '.join(operators)}"
        )
    autoscaler = args.get("autoscaler", AutoscalerKind.CLUSTER_AUTOSCALER)
    if autoscaler not in tuple(AutoscalerKind):
        raise InvalidArgument(
            COMPONENT, "autoscaler", autoscaler, f"use one of {', '.join(k.value for k in AutoscalerKind)}"
        )
    if args.get("karpenter_node_repair") and autoscaler != AutoscalerKind.KARPENTER:
        needs = f"it is Karpenter's: needs autoscaler karpenter, not {AutoscalerKind(autoscaler).value}"
        raise InvalidArgument(COMPONENT, "karpenter_node_repair", True, needs)
    monitoring = args.get("monitoring", MonitoringKind.NONE)
    if monitoring not in tuple(MonitoringKind):
        raise InvalidArgument(
            COMPONENT, "monitoring", monitoring, f"use one of {', '.join(k.value for k in MonitoringKind)}"
        )
    image = args.get("efa_exporter_image")
    if image is not None and not re.fullmatch(r"[^/:\s]+(:\d+)?/[^:\s]+:[\w.-]+", image):
        raise InvalidArgument(
            COMPONENT,
            "efa_exporter_image",
            image,
            "use REGISTRY/REPOSITORY:TAG, such as 123456789012.dkr.ecr.us-east-1.amazonaws.com/efa-node-exporter:1.0.0",
        )
    cluster: ClusterOptions = {"cluster_name": name, **{key: args[key] for key in CLUSTER_OPTIONS if key in args}}  # type: ignore[misc]
    validate_cluster(name, cluster)
    zones = list(network.get("availability_zones", [])) or list(network.get("existing_private_subnet_ids", {}))
    names: set[str] = set()
    for index, group in enumerate(args.get("node_groups", [])):
        where = f"node_groups[{index}]"
        group_name = group.get("name", "")
        if not re.fullmatch(r"[a-z]([-a-z0-9]{0,28}[a-z0-9])?", group_name):
            raise InvalidArgument(COMPONENT, f"{where}.name", group_name, "use a DNS label of at most 30 characters")
        if group_name in names or group_name == "system":
            raise InvalidArgument(
                COMPONENT,
                f"{where}.name",
                group_name,
                "names must be unique and not `system` (the cluster's own group)",
            )
        names.add(group_name)
        if existing is None and not zones:
            raise InvalidArgument(
                COMPONENT, "network.availability_zones", None, "name the zones so node groups can each pick one"
            )
        if existing is None and group.get("availability_zone") not in zones:
            raise InvalidArgument(
                COMPONENT,
                f"{where}.availability_zone",
                group.get("availability_zone"),
                f"use one of the network's zones: {', '.join(zones)}",
            )
        try:
            instance_type = group.get("instance_type", "")
            instance_facts.check_name(COMPONENT, "instance_type", instance_type)  # before EC2 is asked about it
            validate_shape(group, describe(instance_type), zoned=existing is None)
            if autoscaler == AutoscalerKind.KARPENTER:
                validate_karpenter_shape(group, describe(instance_type))
        except InvalidArgument as error:
            raise InvalidArgument(COMPONENT, f"{where}.{error.argument}", error.value, error.allowed) from None
    storage = args.get("storage", StorageKind.FSX)
    if storage not in tuple(StorageKind):
        raise InvalidArgument(COMPONENT, "storage", storage, f"use one of {[kind.value for kind in StorageKind]}")
    if storage == StorageKind.EFS and not zones:
        raise InvalidArgument(
            COMPONENT, "network.availability_zones", None, "name the zones so EFS gets a mount target in each"
        )
    if storage == StorageKind.FSX:
        if not args.get("node_groups"):
            raise InvalidArgument(
                COMPONENT, "storage", storage, "fsx lives in a node group's zone: add a node group, or use efs or none"
            )
        validate_fsx(args.get("fsx", {}))
    if storage == StorageKind.EXISTING_FSX:
        validate_existing_fsx(args.get("existing_fsx", {}))  # type: ignore[arg-type]
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", args.get("training_namespace", "training")):
        raise InvalidArgument(COMPONENT, "training_namespace", args.get("training_namespace"), "use a DNS label")
    if args.get("model_bucket", True) and "checkpoint_expiry_days" in args:
        validate_bucket({"checkpoint_expiry_days": args["checkpoint_expiry_days"]})
    role_access(args.get("service_account_roles", RoleAccess.POD_IDENTITY), COMPONENT, "service_account_roles")
    if "queueing" in args:
        try:
            kueue.plan(reachable_groups(args), args["queueing"], autoscaler == AutoscalerKind.CLUSTER_AUTOSCALER, describe)
        except InvalidArgument as error:
            raise InvalidArgument(COMPONENT, error.argument, error.value, error.allowed) from None


def reachable_groups(args: TrainingPlatformArgs) -> list[NodeGroupShape]:
    """Every group a job's pods may run on, with the nodes it can reach and what launches them: the system group (the
    NCCL check's launcher runs there) and every training group. A new cluster's group without an autoscaler keeps its
    desiredSize nodes (min_size = max_size = desired_size here), which bound a job and which Kueue's quota counts; an
    existing cluster's groups scale as described (min_size to max_size), by whatever autoscaler that cluster runs."""
    autoscaler = args.get("autoscaler", AutoscalerKind.CLUSTER_AUTOSCALER)
    launcher = NodeLauncher.KARPENTER if autoscaler == AutoscalerKind.KARPENTER else NodeLauncher.MANAGED_NODE_GROUP
    groups: list[NodeGroupShape] = [{**group, "launcher": launcher} for group in args.get("node_groups", [])]
    if keeps_desired_size(args):
        groups = [{**group, "min_size": sizes(group)[2], "max_size": sizes(group)[2]} for group in groups]
    return [system_shape(args), *groups]


def keeps_desired_size(args: TrainingPlatformArgs) -> bool:
    """Whether the new cluster's groups stay at their desiredSize: no autoscaler here adds or removes nodes."""
    return args.get("autoscaler") == AutoscalerKind.NONE and "existing_cluster" not in args


# What only a new cluster takes: an existing one has its own VPC, name, version and access entries.
NEW_CLUSTER_ONLY = ("network", "cluster_name", "kubernetes_version", "admin_principal_arns", "private_endpoint_only")
# What only a group made here takes: how its instances are bought and booted.
NEW_GROUP_ONLY = ("capacity_type", "capacity_reservation_id", "root_volume_gib", "metadata_hop_limit", "release_version")


def system_shape(args: TrainingPlatformArgs) -> NodeGroupShape:
    """The system group as a node group (a job's target: the CPU tutorial trains on its two m5.large nodes; an existing
    cluster's system nodes, described): a fixed number of managed nodes, untainted, without EFA, labelled with its
    name like any group (infra.aws.cluster SYSTEM_LABEL)."""
    count = args.get("system_node_count", 2)
    # No availability_zone: the system nodes span the VPC's zones (an existing cluster's, its own), and a job
    # component reads only the type, the size, the labels and the launcher of its group's shape.
    return cast(
        NodeGroupShape,
        {
            "name": SYSTEM_LABEL[GROUP_LABEL],
            "instance_type": args.get("system_instance_type", DEFAULT_SYSTEM_INSTANCE_TYPE),
            "efa": False,
            "min_size": count,
            "max_size": count,
            "desired_size": count,
            "launcher": NodeLauncher.MANAGED_NODE_GROUP,
        },
    )


def _validate_existing(args: TrainingPlatformArgs, existing: ExistingClusterArgs) -> None:
    """What an existing cluster cannot take: settings of a new cluster, node-making autoscalers, new file systems,
    and, when it is given by kubeconfig, anything made in AWS."""
    check_keys(COMPONENT, "existing_cluster.", existing, ExistingClusterArgs)
    validate_existing_cluster(existing)
    for key, value in args.items():
        if key in NEW_CLUSTER_ONLY:
            raise InvalidArgument(COMPONENT, key, value, "it shapes a new cluster: leave it out with existing_cluster")
    for index, group in enumerate(args.get("node_groups", [])):
        for key, value in group.items():
            if key in NEW_GROUP_ONLY:
                raise InvalidArgument(
                    COMPONENT, f"node_groups[{index}].{key}", value, "it shapes a new node group: an existing group "
                    "is described by its instance type, labels, taints, sizes and EFA; leave it out"
                )
    autoscaler = args.get("autoscaler", AutoscalerKind.CLUSTER_AUTOSCALER)
    if autoscaler != AutoscalerKind.NONE:
        raise InvalidArgument(
            COMPONENT, "autoscaler", AutoscalerKind(autoscaler).value,
            "an existing cluster's groups keep what scales them now: use none",
        )
    storage = args.get("storage", StorageKind.FSX)
    if storage in (StorageKind.FSX, StorageKind.EFS):
        raise InvalidArgument(
            COMPONENT, "storage", StorageKind(storage).value,
            "a new file system needs the cluster's subnets: use existing-fsx or none",
        )
    problem = aws_side_problem(existing)
    if problem is None:
        return
    monitoring = args.get("monitoring", MonitoringKind.NONE)
    made_in_aws = (  # (argument, its value, whether it makes something in AWS)
        ("model_bucket", args.get("model_bucket", True), args.get("model_bucket", True)),
        ("node_health", args.get("node_health", True), args.get("node_health", True)),
        ("managed_prometheus", args.get("managed_prometheus", False), args.get("managed_prometheus", False)),
        ("monitoring", monitoring, monitoring == MonitoringKind.CLOUDWATCH),
        ("existing_fsx.security_group_id", args.get("existing_fsx", {}).get("security_group_id"),
         "security_group_id" in args.get("existing_fsx", {})),
    )
    for argument, value, made in made_in_aws:
        if made:
            raise InvalidArgument(COMPONENT, argument, value, f"it makes resources in AWS, and {problem}")


def _region(parent: pulumi.Resource) -> pulumi.Input[str]:
    """The stack's `aws:region`; AWS is asked only when it is not set (an existing cluster given by kubeconfig is
    reached without it)."""
    configured = pulumi.Config("aws").get("region")
    return configured or aws.get_region_output(opts=pulumi.InvokeOutputOptions(parent=parent)).region


def _taints(groups: Sequence[TrainingNodes]) -> list[Taint]:
    """Every taint of the groups: what an add-on on their nodes tolerates."""
    return [taint for group in groups for taint in group.taints]


class TrainingPlatform(pulumi.ComponentResource):
    """A VPC, an EKS cluster with system and training node groups (EFA, GPUs), their autoscaler and device plugins,
    the training operator, shared storage, the model bucket with its IRSA role, and monitoring."""

    provider: k8s.Provider
    """Kubernetes provider of the cluster: what the job components take."""
    cluster_name: str
    """The EKS cluster's name."""
    kubeconfig: pulumi.Output[str]
    """Kubeconfig (secret)."""
    training_namespace: str
    """Namespace for training workloads."""
    storage_claim_name: str | None
    """The ReadWriteMany claim jobs mount (null without shared storage)."""
    bucket_name: pulumi.Output[str] | None
    """The model bucket (null when turned off): a job's `artifact_bucket`."""
    service_account_name: str
    """The ServiceAccount training pods run as, with access to the bucket when there is one."""
    service_account_roles: RoleAccess
    """How service accounts get their IAM roles (EKS Pod Identity or IRSA)."""

    def __init__(self, name: str, args: TrainingPlatformArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        validate(name, args)
        if "existing_cluster" in args and aws_side_problem(args["existing_cluster"]):
            instance_facts.from_catalogue()  # for the rest of this program, its children and the jobs' included
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        tags = dict(args.get("tags", {}))
        self.service_account_roles = RoleAccess(args.get("service_account_roles", RoleAccess.POD_IDENTITY))
        self.existing_cluster = args.get("existing_cluster")
        """The cluster made elsewhere that is the target, as given (None when the platform makes its own)."""
        self.network: Network | None = None
        """The VPC (None on an existing cluster; Python only, as every attribute below not in the class body)."""
        self.cluster: Cluster | None = None
        """The EKS cluster (None on an existing cluster)."""
        self.facts: ClusterFacts | None = None
        """What AWS-side parts read of the EKS cluster (None for a cluster given by kubeconfig)."""
        self.system_nodes: ExistingNodeGroup | None = None
        """An existing cluster's system nodes as described (`system_instance_type`, `system_node_count`)."""
        system: list[pulumi.Resource] = []
        """What add-ons on the system nodes wait for: the system node group, when the platform makes it."""
        if self.existing_cluster is None:
            network, cluster = self._build_network_and_cluster(name, args, tags)
            system.append(cluster.system_node_group)
            self._build_karpenter(name, args, tags, system)
            self._build_node_groups(name, args, tags, network, cluster)
        else:
            self._target_existing(name, args, self.existing_cluster)
        self.training_namespace = args.get("training_namespace", "training")
        namespace = k8s.core.v1.Namespace(
            f"{name}-namespace",
            metadata={"name": self.training_namespace, "labels": TRAINING_LABELS},
            opts=pulumi.ResourceOptions(parent=self, provider=self.provider),
        )
        self.namespace = namespace  # what the namespace's own objects (its NetworkPolicies) are created after
        self._build_node_add_ons(name, args, tags, system, namespace)
        self._build_monitoring(name, args, tags, system)
        self._build_operators(name, args, system)
        self._build_queues(name, args, system)
        self._build_storage(name, args, tags, system, namespace)
        self._build_bucket(name, args, tags, namespace)
        self.register_outputs({"kubeconfig": self.kubeconfig, "bucket_name": self.bucket_name})

    def _after(self, resources: Sequence[pulumi.Resource]) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, depends_on=list(resources))

    def _network(self) -> Network:
        assert self.network is not None, "validate() refuses new file systems on an existing cluster"
        return self.network

    def _oidc(self) -> dict[str, Any]:
        assert self.facts is not None, "validate() refuses AWS-side parts without an EKS cluster"
        return {"oidc_provider_arn": self.facts.oidc_provider_arn, "oidc_issuer": self.facts.oidc_issuer}

    def _role_access(self) -> dict[str, Any]:
        """What a component whose service account gets a role takes: how, and the cluster's inputs for either way."""
        return {"access": self.service_account_roles, "cluster_name": self.cluster_name, **self._oidc()}

    def _build_network_and_cluster(
        self, name: str, args: TrainingPlatformArgs, tags: dict[str, str]
    ) -> tuple[Network, Cluster]:
        """The VPC, then the EKS cluster with its system node group in the VPC's subnets."""
        child = pulumi.ResourceOptions(parent=self)
        network_args: NetworkArgs = {
            **args.get("network", {}),
            "tags": {**tags, **args.get("network", {}).get("tags", {})},
        }
        self.network = network = Network(f"{name}-network", network_args, opts=child)
        cluster_args: ClusterArgs = {
            "vpc_id": network.vpc_id,
            "private_subnet_ids": network.private_subnet_ids,
            "public_subnet_ids": network.public_subnet_ids,
            "cluster_name": args.get("cluster_name", name),
            "tags": tags,
        }
        for key in (
            "kubernetes_version",
            "admin_principal_arns",
            "private_endpoint_only",
            "system_instance_type",
            "system_node_count",
        ):
            if key in args:
                cluster_args[key] = args[key]  # type: ignore[literal-required]
        self.cluster = cluster = Cluster(f"{name}-cluster", cluster_args, opts=child)
        self.provider, self.cluster_name, self.kubeconfig = cluster.provider, cluster.cluster_name, cluster.kubeconfig
        self.facts = ClusterFacts(
            network.vpc_id, cluster.cluster_security_group_id, cluster.oidc_provider_arn, cluster.oidc_issuer
        )
        return network, cluster

    def _target_existing(self, name: str, args: TrainingPlatformArgs, existing: ExistingClusterArgs) -> None:
        """A cluster made elsewhere: its provider, and its node groups as they are described."""
        self.provider, self.kubeconfig = existing_provider(name, existing, _region(self), self)
        self.cluster_name = existing.get("eks_cluster_name", "")
        self.facts = eks_facts(self.cluster_name, self) if self.cluster_name else None
        self.karpenter = None
        self.system_nodes = ExistingNodeGroup(f"{name}-system", system_shape(args), pulumi.ResourceOptions(parent=self))
        self.node_groups = {
            shape.get("name", ""): ExistingNodeGroup(
                f"{name}-{shape.get('name', '')}",
                shape,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for shape in args.get("node_groups", [])
        }

    def _build_karpenter(
        self, name: str, args: TrainingPlatformArgs, tags: dict[str, str], system: Sequence[pulumi.Resource]
    ) -> None:
        """The Karpenter controller on the system nodes, when it launches the training nodes."""
        self.karpenter: Karpenter | None = None
        """The Karpenter controller (None unless `autoscaler` is karpenter)."""
        if args.get("autoscaler", AutoscalerKind.CLUSTER_AUTOSCALER) == AutoscalerKind.KARPENTER:
            self.karpenter = Karpenter(
                f"{name}-karpenter",
                {
                    "provider": self.provider,
                    "tags": tags,
                    "system_node_count": args.get("system_node_count", 2),
                    "node_repair": args.get("karpenter_node_repair", False),
                    **self._role_access(),  # type: ignore[typeddict-item]
                },
                opts=self._after(system),
            )

    def _build_node_groups(
        self, name: str, args: TrainingPlatformArgs, tags: dict[str, str], network: Network, cluster: Cluster
    ) -> None:
        """Each training group as a managed node group, or as a Karpenter node pool, in its zone's subnet."""
        self.node_groups: dict[str, TrainingNodes] = {}
        """Training node groups (or Karpenter node pools) by name: facts, labels, taints, EFA devices, shape."""
        for shape in args.get("node_groups", []):
            group_name = shape.get("name", "")  # validated: a DNS label
            placed = {
                "cluster_name": self.cluster_name,
                "vpc_id": network.vpc_id,
                "tags": tags,
                "cluster_security_group_id": cluster.cluster_security_group_id,
                "subnet_id": network.private_subnet_by_zone[shape["availability_zone"]],
            }
            if self.karpenter is not None:
                pool_args: KarpenterNodePoolArgs = {
                    **shape,
                    **placed,
                    "provider": self.provider,  # type: ignore[typeddict-item]
                    "node_role_name": self.karpenter.node_role_name,
                }
                pool = KarpenterNodePool(f"{name}-{group_name}", pool_args, opts=self._after([self.karpenter.release]))
                self.node_groups[group_name] = pool
                continue
            group_args: EfaNodeGroupArgs = {
                **shape,
                **placed,  # type: ignore[typeddict-item]
                "kubernetes_version": cluster.kubernetes_version,
                "auto_repair": args.get("node_health", True),
            }
            self.node_groups[group_name] = EfaNodeGroup(
                f"{name}-{group_name}",
                group_args,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]),
            )

    def _efa_groups(self) -> list[TrainingNodes]:
        return [group for group in self.node_groups.values() if group.efa_interfaces]

    def _gpu_groups(self) -> list[TrainingNodes]:
        return [group for group in self.node_groups.values() if group.instance.is_gpu]

    def _build_node_add_ons(
        self,
        name: str,
        args: TrainingPlatformArgs,
        tags: dict[str, str],
        system: Sequence[pulumi.Resource],
        namespace: pulumi.Resource,
    ) -> None:
        """What the nodes need: the device plugins, the Cluster Autoscaler, metrics-server and node health."""
        self.cluster_autoscaler: ClusterAutoscaler | None = None
        """The Cluster Autoscaler (None unless `autoscaler` is cluster-autoscaler)."""
        efa_groups, gpu_groups = self._efa_groups(), self._gpu_groups()
        region = _region(self)
        if efa_groups and args.get("efa_device_plugin", True):
            EfaDevicePlugin(
                f"{name}-efa-device-plugin",
                {
                    "provider": self.provider,
                    "node_taints": _taints(efa_groups),
                    "instance_types": [g.instance_type for g in efa_groups],
                    "region": region,
                },
                opts=self._after(system),
            )
        if gpu_groups and args.get("nvidia_device_plugin", True):
            NvidiaDevicePlugin(
                f"{name}-nvidia-device-plugin",
                {
                    "provider": self.provider,
                    "node_taints": _taints(gpu_groups),
                },
                opts=self._after(system),
            )
        neuron_groups = [group for group in self.node_groups.values() if group.instance.neuron_devices]
        if neuron_groups and args.get("neuron_device_plugin", True):
            NeuronDevicePlugin(
                f"{name}-neuron-device-plugin",
                {"provider": self.provider, "node_taints": _taints(neuron_groups)},
                opts=self._after(system),
            )
        if args.get("autoscaler", AutoscalerKind.CLUSTER_AUTOSCALER) == AutoscalerKind.CLUSTER_AUTOSCALER:
            assert self.cluster is not None, "validate() refuses an autoscaler on an existing cluster"
            self.cluster_autoscaler = ClusterAutoscaler(
                f"{name}-autoscaler",
                {
                    "provider": self.provider,
                    "kubernetes_version": self.cluster.kubernetes_version,
                    "region": region,
                    "tags": tags,
                    "provisioning_requests": "queueing" in args,
                    **self._role_access(),  # type: ignore[typeddict-item]
                },
                opts=self._after(system),
            )
        if args.get("metrics_server", True):
            MetricsServer(f"{name}-metrics-server", {"provider": self.provider}, opts=self._after(system))
        if gpu_groups and args.get("node_health", True):
            NodeQuarantine(
                f"{name}-node-quarantine",
                {
                    "provider": self.provider,
                    "namespace": self.training_namespace,
                    "service_account": DEFAULT_SERVICE_ACCOUNT,
                },
                opts=self._after([namespace]),
            )
        if args.get("node_health", True):
            # Reports GPU, EFA, kernel and runtime faults as node conditions, which node auto-repair acts on. Its DCGM
            # server tolerates nothing (aws/eks-node-monitoring-agent chart 1.7.0 values.yaml: dcgmAgent.tolerations
            # []), and the add-on's configuration is its chart's values: without these, tainted GPU nodes get none.
            gpu_taints = _taints(gpu_groups)
            dcgm = {"dcgmAgent": {"tolerations": tolerations(gpu_taints)}} if gpu_taints else None
            aws.eks.Addon(
                f"{name}-node-monitoring-agent",
                cluster_name=self.cluster_name,
                addon_name=NODE_AGENT,
                addon_version=versions.ADDON_VERSIONS[NODE_AGENT],
                configuration_values=json.dumps(dcgm) if dcgm else None,
                resolve_conflicts_on_create="OVERWRITE",
                resolve_conflicts_on_update="OVERWRITE",
                tags=tags,
                opts=pulumi.ResourceOptions(parent=self, depends_on=system),
            )

    def _build_monitoring(
        self, name: str, args: TrainingPlatformArgs, tags: dict[str, str], system: Sequence[pulumi.Resource]
    ) -> None:
        """Prometheus and Grafana with the GPU and EFA exporters, or CloudWatch Container Insights."""
        self.prometheus: pulumi.Resource | None = None
        """kube-prometheus-stack, which PodMonitors wait for (None unless `monitoring` is prometheus)."""
        monitoring = args.get("monitoring", MonitoringKind.NONE)
        efa_groups, gpu_groups = self._efa_groups(), self._gpu_groups()
        if monitoring == MonitoringKind.PROMETHEUS:
            self.prometheus = PrometheusMonitoring(
                f"{name}-monitoring",
                {  # type: ignore[typeddict-item]
                    "provider": self.provider,
                    **({"gpu_node_taints": _taints(gpu_groups)} if gpu_groups else {}),
                    **({"efa_node_taints": _taints(efa_groups)} if efa_groups else {}),
                    **({"efa_exporter_image": args["efa_exporter_image"]} if "efa_exporter_image" in args else {}),
                    **(
                        {"managed_prometheus": {**self._oidc(), "tags": tags}} if args.get("managed_prometheus") else {}
                    ),
                },
                opts=self._after(system),
            ).release
        elif monitoring == MonitoringKind.CLOUDWATCH:
            CloudWatchObservability(
                f"{name}-cloudwatch",
                {
                    "cluster_name": self.cluster_name,
                    "tags": tags,
                    **self._oidc(),  # type: ignore[typeddict-item]
                },
                opts=self._after(system),
            )

    def _build_operators(self, name: str, args: TrainingPlatformArgs, system: Sequence[pulumi.Resource]) -> None:
        """The training operator v1 or Kubeflow Trainer v2, and the MPI operator for GPU groups' NCCL check."""
        # The GPU workshop's NCCL check is an MPIJob v2beta1: the MPI operator then owns mpijobs.kubeflow.org,
        # and the training operator is installed without its own MPIJob v1 CRD and controller.
        gpu_efa = any(group.efa_interfaces for group in self._gpu_groups())
        with_mpi = args.get("mpi_operator", gpu_efa)
        self.training_operator: TrainingOperator | None = None
        """The training operator v1 (None unless `training_operator` is v1)."""
        self.job_operator: pulumi.Resource | None = None
        """What a training job waits for: the installer of its kind's CRD (None without an operator)."""
        operator = args.get("training_operator", OperatorKind.V1)
        sources = args.get("addon_sources", {})
        if operator == OperatorKind.V1:
            operator_args: TrainingOperatorArgs = {"provider": self.provider, "mpi_jobs": not with_mpi}
            if "training_operator" in sources:
                operator_args["directory"] = sources["training_operator"]
            self.training_operator = TrainingOperator(
                f"{name}-training-operator", operator_args, opts=self._after(system)
            )
            self.job_operator = self.training_operator.manifests
        elif operator == OperatorKind.V2:
            trainer_args: KubeflowTrainerArgs = {"provider": self.provider}
            if "kubeflow_trainer" in sources:
                trainer_args["chart_folder"] = sources["kubeflow_trainer"]
            trainer = KubeflowTrainer(f"{name}-kubeflow-trainer", trainer_args, opts=self._after(system))
            self.job_operator = trainer.release
        self.mpi_operator: MpiOperator | None = None
        """The MPI operator v2: MPIJobs must depend on it (None when not installed)."""
        if with_mpi:
            mpi_after = [*system, *([self.training_operator.manifests] if self.training_operator else [])]
            mpi_args: MpiOperatorArgs = {"provider": self.provider}
            if "mpi_operator" in sources:
                mpi_args["file"] = sources["mpi_operator"]
            self.mpi_operator = MpiOperator(f"{name}-mpi-operator", mpi_args, opts=self._after(mpi_after))

    def _build_queues(self, name: str, args: TrainingPlatformArgs, system: Sequence[pulumi.Resource]) -> None:
        """Kueue and the queues (None without `queueing`); with the Cluster Autoscaler, after the ProvisioningRequest
        CRD: Kueue looks for that API once, when it starts."""
        self.queues: Kueue | None = None
        """Kueue, its flavors and queues: a job's `submission` (None without `queueing`)."""
        if "queueing" not in args:
            return
        autoscaler = self.cluster_autoscaler.provisioning_requests if self.cluster_autoscaler else None
        queue_args: KueueArgs = {
            "provider": self.provider,
            "groups": reachable_groups(args),
            "namespace": self.training_namespace,
            "queueing": args["queueing"],
            "provisioning": autoscaler is not None,
        }
        sources = args.get("addon_sources", {})
        if "kueue" in sources:
            queue_args["chart_folder"] = sources["kueue"]
        after = [*system, *([autoscaler] if autoscaler else [])]
        self.queues = Kueue(f"{name}-kueue", queue_args, opts=self._after(after))

    def submission(self, group: str) -> QueuedJobSpec:
        """What a job on `group` adds to its spec to be queued (TrainingJobSpec.queue, queue_placement); nothing
        without queueing."""
        if self.queues is None:
            return {}
        submission = self.queues.submission(group)
        spec: QueuedJobSpec = {"queue": submission.queue}
        if submission.placement:
            spec["queue_placement"] = submission.placement
        return spec

    def _build_storage(
        self,
        name: str,
        args: TrainingPlatformArgs,
        tags: dict[str, str],
        system: Sequence[pulumi.Resource],
        namespace: pulumi.Resource,
    ) -> None:
        """The shared file system and the claim every training pod mounts: FSx for Lustre, an existing one, or EFS."""
        self.storage_claim_name = None
        storage = args.get("storage", StorageKind.FSX)
        in_namespace = self._after([*system, namespace])
        if storage == StorageKind.EXISTING_FSX:
            nodes = {"node_security_group_id": self.facts.security_group_id} if self.facts else {}
            existing: ExistingFsxVolumeArgs = {
                "provider": self.provider,
                "namespace": self.training_namespace,
                "tags": tags,
                "csi_driver": args.get("fsx_csi_driver", True),
                **nodes,
                **args["existing_fsx"],  # type: ignore[typeddict-item]
            }
            self.storage_claim_name = ExistingFsxVolume(f"{name}-existing-fsx", existing, opts=in_namespace).claim_name
        if storage not in (StorageKind.FSX, StorageKind.EFS):
            return
        assert self.facts is not None, "validate() refuses new file systems on an existing cluster"
        storage_base = {
            "provider": self.provider,
            "vpc_id": self.facts.vpc_id,
            "node_security_group_id": self.facts.security_group_id,
            "namespace": self.training_namespace,
            "tags": tags,
            **self._oidc(),
        }
        if storage == StorageKind.FSX:
            zone = args.get("node_groups", [])[0]["availability_zone"]
            fsx_args: FsxLustreStorageArgs = {
                **storage_base,
                **args.get("fsx", {}),
                "subnet_id": self._network().private_subnet_by_zone[zone],
            }  # type: ignore[typeddict-item]
            self.storage_claim_name = FsxLustreStorage(f"{name}-fsx", fsx_args, opts=in_namespace).claim_name
        else:
            subnets = list(self._network().private_subnet_by_zone.values())
            efs_args: EfsStorageArgs = {**storage_base, "subnet_ids": subnets}  # type: ignore[typeddict-item]
            self.storage_claim_name = EfsStorage(f"{name}-efs", efs_args, opts=in_namespace).claim_name

    def _build_bucket(
        self, name: str, args: TrainingPlatformArgs, tags: dict[str, str], namespace: pulumi.Resource
    ) -> None:
        """The model bucket and the service account whose role may use it; without the bucket, the same service
        account with no role, since every training pod runs as it (and NodeQuarantine grants it its rights)."""
        self.bucket_name = None
        if not args.get("model_bucket", True):
            k8s.core.v1.ServiceAccount(
                f"{name}-training-service-account",
                metadata={"name": DEFAULT_SERVICE_ACCOUNT, "namespace": self.training_namespace},
                opts=pulumi.ResourceOptions(parent=self, provider=self.provider, depends_on=[namespace]),
            )
            self.service_account_name = DEFAULT_SERVICE_ACCOUNT
            return
        bucket = ModelBucket(
            f"{name}-models",
            {  # type: ignore[arg-type]
                "provider": self.provider,
                "namespace": self.training_namespace,
                "tags": tags,
                **self._role_access(),
                **(
                    {"checkpoint_expiry_days": args["checkpoint_expiry_days"]}
                    if "checkpoint_expiry_days" in args
                    else {}
                ),
            },
            opts=self._after([namespace]),
        )
        self.bucket_name, self.service_account_name = bucket.bucket_name, bucket.service_account_name
