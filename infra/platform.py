"""TrainingPlatform: network, cluster, node groups, add-ons, storage and bucket from one args dict.

Here are the component and its training namespace (with its Pod Security levels). Its args are
infra.platform_args', its checks infra.platform_validation's, the groups its jobs reach infra.platform_groups'; its
other children are made by the functions of infra.platform_cluster, platform_addons and platform_storage, each
returning what it made, so `__init__` reads as what flows from one to the next.
"""

import pulumi
import pulumi_kubernetes as k8s

from eks_ddp.infra.addons.helm import POD_SECURITY
from eks_ddp.infra.addons.karpenter import Karpenter
from eks_ddp.infra.aws.cluster import Cluster
from eks_ddp.infra.aws.efa_node_group import TrainingNodes
from eks_ddp.infra.aws.iam import RoleAccess
from eks_ddp.infra.aws.network import Network
from eks_ddp.infra.existing_cluster import ExistingNodeGroup, aws_side_problem
from eks_ddp.infra.facts import instance_facts
from eks_ddp.infra.platform_addons import (
    cloudwatch,
    cluster_autoscaler,
    device_plugins,
    job_operator,
    metrics_server,
    mpi_operator,
    node_health,
    prometheus,
    queues,
    wants_mpi_operator,
)
from eks_ddp.infra.platform_args import (
    COMPONENT,
    AutoscalerKind,
    MonitoringKind,
    QueuedJobSpec,
    StorageKind,
    TrainingPlatformArgs,
)
from eks_ddp.infra.platform_cluster import described_groups, existing_cluster, karpenter, new_cluster, node_groups
from eks_ddp.infra.platform_groups import keeps_desired_size, reachable_groups, system_shape
from eks_ddp.infra.platform_site import Site
from eks_ddp.infra.platform_storage import bucket_and_service_account, shared_storage
from eks_ddp.infra.platform_validation import validate

__all__ = [
    "AutoscalerKind",
    "MonitoringKind",
    "QueuedJobSpec",
    "StorageKind",
    "TrainingPlatform",
    "TrainingPlatformArgs",
    "keeps_desired_size",
    "reachable_groups",
    "system_shape",
    "validate",
]

TRAINING_LABELS = {
    "purpose": "distributed-training",
    # Pod Security Admission: enforce baseline, because some containers need more than restricted allows (the claim's
    # root permissions step, with CHOWN and DAC_OVERRIDE, the GPU pre-flight's DCGM, and the NCCL check's sshd and
    # mpirun, all root); warn and audit at restricted, so any other pod that falls short of it is named
    # (workloads/security.py; tests/cluster/test_pod_security_on_engines.py asks the API server itself).
    **POD_SECURITY,
}


def training_namespace(site: Site) -> k8s.core.v1.Namespace:
    """The namespace training workloads run in, at Pod Security baseline."""
    return k8s.core.v1.Namespace(
        f"{site.name}-namespace",
        metadata={"name": site.namespace, "labels": TRAINING_LABELS},
        opts=pulumi.ResourceOptions(parent=site.parent, provider=site.provider),
    )


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
        self.existing_cluster = args.get("existing_cluster")
        """The cluster made elsewhere that is the target, as given (None when the platform makes its own)."""
        self.network: Network | None = None
        """The VPC (None on an existing cluster; Python only, as every attribute below not in the class body)."""
        self.cluster: Cluster | None = None
        """The EKS cluster (None on an existing cluster)."""
        self.system_nodes: ExistingNodeGroup | None = None
        """An existing cluster's system nodes as described (`system_instance_type`, `system_node_count`)."""
        self.karpenter: Karpenter | None = None
        """The Karpenter controller (None unless `autoscaler` is karpenter)."""
        self.node_groups: dict[str, TrainingNodes]
        """Training node groups (or Karpenter node pools) by name: facts, labels, taints, EFA devices, shape."""
        if self.existing_cluster is None:
            self.network, self.cluster, site = new_cluster(self, name, args)
            self.karpenter = karpenter(site, args)
            self.node_groups = node_groups(site, args, self.network, self.cluster, self.karpenter)
        else:
            site, self.system_nodes = existing_cluster(self, name, args, self.existing_cluster)
            self.node_groups = described_groups(site, args)
        self.provider, self.cluster_name, self.kubeconfig = site.provider, site.cluster_name, site.kubeconfig
        self.facts = site.facts
        """What AWS-side parts read of the EKS cluster (None for a cluster given by kubeconfig)."""
        self.service_account_roles, self.training_namespace = site.roles, site.namespace
        self.namespace = training_namespace(site)
        """What the namespace's own objects (its NetworkPolicies) are created after."""
        groups = list(self.node_groups.values())
        device_plugins(site, args, groups)
        self.cluster_autoscaler = cluster_autoscaler(site, args, self.cluster)
        """The Cluster Autoscaler (None unless `autoscaler` is cluster-autoscaler)."""
        metrics_server(site, args)
        node_health(site, args, groups, self.namespace)
        monitoring = prometheus(site, args, groups)
        self.prometheus = monitoring.release if monitoring else None
        """kube-prometheus-stack, which PodMonitors wait for (None unless `monitoring` is prometheus)."""
        cloudwatch(site, args)
        with_mpi = wants_mpi_operator(args, groups)
        self.training_operator, self.job_operator = job_operator(site, args, with_mpi)
        """The training operator v1 (None unless `training_operator` is v1), and what a training job waits for: the
        installer of its kind's CRD (None without an operator)."""
        self.mpi_operator = mpi_operator(site, args, with_mpi, self.training_operator)
        """The MPI operator v2: MPIJobs must depend on it (None when not installed)."""
        self.queues = queues(site, args, self.cluster_autoscaler)
        """Kueue, its flavors and queues: a job's `submission` (None without `queueing`)."""
        storage = shared_storage(site, args, self.namespace, self.network)
        self.storage_claim_name = storage.claim_name if storage else None
        self.bucket_name, self.service_account_name = bucket_and_service_account(site, args, self.namespace)
        self.register_outputs({"kubeconfig": self.kubeconfig, "bucket_name": self.bucket_name})

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
