"""What TrainingPlatform takes: its args, as every language passes them, and the kinds of its choices."""

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import NotRequired, TypedDict, cast

from eks_ddp.infra.addons.kueue import QueueingArgs
from eks_ddp.infra.addons.training_operator import OperatorKind
from eks_ddp.infra.aws.cluster import ClusterOptions
from eks_ddp.infra.aws.iam import RoleAccess
from eks_ddp.infra.aws.network import NetworkArgs
from eks_ddp.infra.existing_cluster import ExistingClusterArgs
from eks_ddp.infra.node_group import NodeGroupShape
from eks_ddp.infra.storage.existing_fsx import ExistingFsxOptions
from eks_ddp.infra.storage.fsx import FsxOptions

COMPONENT = "TrainingPlatform"
DEFAULT_NAMESPACE = "training"
"""The training namespace's name unless `training_namespace` gives one."""


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
    "kubernetes_version",
    "admin_principal_arns",
    "private_endpoint_only",
    "system_instance_type",
    "system_node_count",
)
"""The new cluster's settings the platform passes on as they are given."""


def cluster_options(name: str, args: TrainingPlatformArgs) -> ClusterOptions:
    """The new cluster's own settings: its name (default the platform's) and CLUSTER_OPTIONS as given."""
    given = {key: value for key, value in args.items() if key in CLUSTER_OPTIONS}
    # Honest: each key in CLUSTER_OPTIONS is declared alike in TrainingPlatformArgs and ClusterOptions.
    return cast(ClusterOptions, {"cluster_name": args.get("cluster_name", name), **given})
