"""A TrainingPlatform's cluster-side parts: what the nodes need (device plugins, the Cluster Autoscaler,
metrics-server, node health), monitoring, the job operators and the queues. Each function returns what it made (None
for what the args leave out)."""

import json
from collections.abc import Sequence

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from eks_ddp.infra.addons.cloudwatch_observability import CloudWatchObservability, CloudWatchObservabilityArgs
from eks_ddp.infra.addons.cluster_autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from eks_ddp.infra.addons.efa_device_plugin import EfaDevicePlugin
from eks_ddp.infra.addons.helm import tolerations
from eks_ddp.infra.addons.kubeflow_trainer import KubeflowTrainer, KubeflowTrainerArgs
from eks_ddp.infra.addons.kueue import Kueue, KueueArgs
from eks_ddp.infra.addons.metrics_server import MetricsServer
from eks_ddp.infra.addons.mpi_operator import MpiOperator, MpiOperatorArgs
from eks_ddp.infra.addons.neuron_device_plugin import NeuronDevicePlugin
from eks_ddp.infra.addons.node_quarantine import NodeQuarantine
from eks_ddp.infra.addons.nvidia_device_plugin import NvidiaDevicePlugin
from eks_ddp.infra.addons.prometheus_monitoring import PrometheusMonitoring, PrometheusMonitoringArgs
from eks_ddp.infra.addons.training_operator import OperatorKind, TrainingOperator, TrainingOperatorArgs
from eks_ddp.infra.aws.cluster import Cluster
from eks_ddp.infra.aws.efa_node_group import TrainingNodes
from eks_ddp.infra.aws.model_bucket import DEFAULT_SERVICE_ACCOUNT
from eks_ddp.infra.facts import versions
from eks_ddp.infra.platform_args import AutoscalerKind, MonitoringKind, TrainingPlatformArgs
from eks_ddp.infra.platform_groups import reachable_groups
from eks_ddp.infra.platform_site import Site, taints_of

NODE_AGENT = "eks-node-monitoring-agent"
def efa_groups(groups: Sequence[TrainingNodes]) -> list[TrainingNodes]:
    return [group for group in groups if group.efa_interfaces]


def gpu_groups(groups: Sequence[TrainingNodes]) -> list[TrainingNodes]:
    return [group for group in groups if group.instance.is_gpu]


def device_plugins(site: Site, args: TrainingPlatformArgs, groups: Sequence[TrainingNodes]) -> list[pulumi.Resource]:
    """The EFA, NVIDIA and Neuron device plugins, each where a group has its devices (and `args` leaves it on)."""
    plugins: list[pulumi.Resource] = []
    efa, gpus = efa_groups(groups), gpu_groups(groups)
    neuron = [group for group in groups if group.instance.neuron_devices]
    if efa and args.get("efa_device_plugin", True):
        plugins.append(EfaDevicePlugin(
            f"{site.name}-efa-device-plugin",
            {
                "provider": site.provider,
                "node_taints": taints_of(efa),
                "instance_types": [group.instance_type for group in efa],
                "region": site.region,
            },
            opts=site.after(site.system),
        ))
    if gpus and args.get("nvidia_device_plugin", True):
        plugins.append(NvidiaDevicePlugin(
            f"{site.name}-nvidia-device-plugin",
            {"provider": site.provider, "node_taints": taints_of(gpus)},
            opts=site.after(site.system),
        ))
    if neuron and args.get("neuron_device_plugin", True):
        plugins.append(NeuronDevicePlugin(
            f"{site.name}-neuron-device-plugin",
            {"provider": site.provider, "node_taints": taints_of(neuron)},
            opts=site.after(site.system),
        ))
    return plugins


def cluster_autoscaler(site: Site, args: TrainingPlatformArgs, cluster: Cluster | None) -> ClusterAutoscaler | None:
    """The Cluster Autoscaler of the managed node groups (None unless `autoscaler` is cluster-autoscaler)."""
    if args.get("autoscaler", AutoscalerKind.CLUSTER_AUTOSCALER) != AutoscalerKind.CLUSTER_AUTOSCALER:
        return None
    assert cluster is not None, "validate() refuses an autoscaler on an existing cluster"
    autoscaler_args: ClusterAutoscalerArgs = {
        "provider": site.provider,
        "kubernetes_version": cluster.kubernetes_version,
        "region": site.region,
        "tags": site.tags,
        "provisioning_requests": "queueing" in args,
        **site.role_inputs(),
    }
    return ClusterAutoscaler(f"{site.name}-autoscaler", autoscaler_args, opts=site.after(site.system))


def metrics_server(site: Site, args: TrainingPlatformArgs) -> MetricsServer | None:
    if not args.get("metrics_server", True):
        return None
    return MetricsServer(f"{site.name}-metrics-server", {"provider": site.provider}, opts=site.after(site.system))


def node_health(
    site: Site, args: TrainingPlatformArgs, groups: Sequence[TrainingNodes], namespace: pulumi.Resource
) -> list[pulumi.Resource]:
    """The EKS node monitoring agent, and the right for GPU pods whose pre-flight fails to taint their own node
    (NodeQuarantine), unless `node_health` is off."""
    if not args.get("node_health", True):
        return []
    gpu_taints = taints_of(gpu_groups(groups))
    made: list[pulumi.Resource] = []
    if gpu_groups(groups):
        made.append(NodeQuarantine(
            f"{site.name}-node-quarantine",
            {"provider": site.provider, "namespace": site.namespace, "service_account": DEFAULT_SERVICE_ACCOUNT},
            opts=site.after([namespace]),
        ))
    # Reports GPU, EFA, kernel and runtime faults as node conditions, which node auto-repair acts on. Its DCGM
    # server tolerates nothing (aws/eks-node-monitoring-agent chart 1.7.0 values.yaml: dcgmAgent.tolerations
    # []), and the add-on's configuration is its chart's values: without these, tainted GPU nodes get none.
    dcgm = {"dcgmAgent": {"tolerations": tolerations(gpu_taints)}} if gpu_taints else None
    made.append(aws.eks.Addon(
        f"{site.name}-node-monitoring-agent",
        cluster_name=site.cluster_name,
        addon_name=NODE_AGENT,
        addon_version=versions.ADDON_VERSIONS[NODE_AGENT],
        configuration_values=json.dumps(dcgm) if dcgm else None,
        resolve_conflicts_on_create="OVERWRITE",
        resolve_conflicts_on_update="OVERWRITE",
        tags=site.tags,
        opts=site.after(site.system),
    ))
    return made


def prometheus(
    site: Site, args: TrainingPlatformArgs, groups: Sequence[TrainingNodes]
) -> PrometheusMonitoring | None:
    """Prometheus and Grafana with the GPU and EFA exporters (None unless `monitoring` is prometheus)."""
    if args.get("monitoring", MonitoringKind.NONE) != MonitoringKind.PROMETHEUS:
        return None
    monitoring_args: PrometheusMonitoringArgs = {"provider": site.provider}
    if gpu_groups(groups):
        monitoring_args["gpu_node_taints"] = taints_of(gpu_groups(groups))
    if efa_groups(groups):
        monitoring_args["efa_node_taints"] = taints_of(efa_groups(groups))
    if "efa_exporter_image" in args:
        monitoring_args["efa_exporter_image"] = args["efa_exporter_image"]
    if args.get("managed_prometheus"):
        monitoring_args["managed_prometheus"] = {**site.oidc(), "tags": site.tags}
    return PrometheusMonitoring(f"{site.name}-monitoring", monitoring_args, opts=site.after(site.system))


def cloudwatch(site: Site, args: TrainingPlatformArgs) -> CloudWatchObservability | None:
    """CloudWatch Container Insights (None unless `monitoring` is cloudwatch)."""
    if args.get("monitoring", MonitoringKind.NONE) != MonitoringKind.CLOUDWATCH:
        return None
    insights: CloudWatchObservabilityArgs = {"cluster_name": site.cluster_name, "tags": site.tags, **site.oidc()}
    return CloudWatchObservability(f"{site.name}-cloudwatch", insights, opts=site.after(site.system))


def wants_mpi_operator(args: TrainingPlatformArgs, groups: Sequence[TrainingNodes]) -> bool:
    """Whether the MPI operator v2 is installed: as `mpi_operator` says, by default where a GPU group has EFA."""
    # The GPU workshop's NCCL check is an MPIJob v2beta1: the MPI operator then owns mpijobs.kubeflow.org,
    # and the training operator is installed without its own MPIJob v1 CRD and controller.
    return args.get("mpi_operator", any(group.efa_interfaces for group in gpu_groups(groups)))


def job_operator(
    site: Site, args: TrainingPlatformArgs, with_mpi: bool
) -> tuple[TrainingOperator | None, pulumi.Resource | None]:
    """The training operator v1 or Kubeflow Trainer v2: the training operator (None unless v1), and what a training
    job waits for, the installer of its kind's CRD (None without an operator)."""
    operator = args.get("training_operator", OperatorKind.V1)
    sources = args.get("addon_sources", {})
    if operator == OperatorKind.V1:
        operator_args: TrainingOperatorArgs = {"provider": site.provider, "mpi_jobs": not with_mpi}
        if "training_operator" in sources:
            operator_args["directory"] = sources["training_operator"]
        training_operator = TrainingOperator(
            f"{site.name}-training-operator", operator_args, opts=site.after(site.system)
        )
        return training_operator, training_operator.manifests
    if operator == OperatorKind.V2:
        trainer_args: KubeflowTrainerArgs = {"provider": site.provider}
        if "kubeflow_trainer" in sources:
            trainer_args["chart_folder"] = sources["kubeflow_trainer"]
        trainer = KubeflowTrainer(f"{site.name}-kubeflow-trainer", trainer_args, opts=site.after(site.system))
        return None, trainer.release
    return None, None


def mpi_operator(
    site: Site, args: TrainingPlatformArgs, with_mpi: bool, training_operator: TrainingOperator | None
) -> MpiOperator | None:
    """The MPI operator v2, for MPIJobs, after the training operator (None unless `with_mpi`)."""
    if not with_mpi:
        return None
    after = [*site.system, *([training_operator.manifests] if training_operator else [])]
    mpi_args: MpiOperatorArgs = {"provider": site.provider}
    sources = args.get("addon_sources", {})
    if "mpi_operator" in sources:
        mpi_args["file"] = sources["mpi_operator"]
    return MpiOperator(f"{site.name}-mpi-operator", mpi_args, opts=site.after(after))


def queues(site: Site, args: TrainingPlatformArgs, autoscaler: ClusterAutoscaler | None) -> Kueue | None:
    """Kueue and the queues (None without `queueing`); with the Cluster Autoscaler, after the ProvisioningRequest
    CRD: Kueue looks for that API once, when it starts."""
    if "queueing" not in args:
        return None
    provisioning = autoscaler.provisioning_requests if autoscaler else None
    queue_args: KueueArgs = {
        "provider": site.provider,
        "groups": reachable_groups(args),
        "namespace": site.namespace,
        "queueing": args["queueing"],
        "provisioning": provisioning is not None,
    }
    sources = args.get("addon_sources", {})
    if "kueue" in sources:
        queue_args["chart_folder"] = sources["kueue"]
    after = [*site.system, *([provisioning] if provisioning else [])]
    return Kueue(f"{site.name}-kueue", queue_args, opts=site.after(after))
