"""PrometheusMonitoring: Prometheus and Grafana on the system nodes, GPU and EFA exporters on the training nodes,
and the dashboards in infra/addons/dashboards/ (eks-ddp:monitoring prometheus).

What each exporter exports is decided here, so the dashboards can be checked against it (tests/infra):
- the trainer's own metrics (trainer/metrics_export.py), scraped by the PodMonitor the training jobs bring;
- DCGM_COUNTERS, the fields NVIDIA/dcgm-exporter 4.8.2 reads (its chart's `customMetrics`, same CSV format as its
  etc/default-counters.csv), as `DCGM_FI_*` gauges per GPU;
- EFA_COUNTERS, AWS's `amazonefa` collector (aws-samples/awsome-distributed-training
  4.validation_and_observability/3.efa-node-exporter/amazon_efa_linux.go): `node_amazonefa_<counter>` per EFA
  device. Upstream node_exporter's infiniband collector reads ports/N/counters/, which EFA devices do not have
  (their counters are hw_counters), so AWS's fork is the one that sees EFA; it ships no image: build it from that
  directory and set `efa_exporter_image` (`eks-ddp:efaExporterImage`), else the fabric dashboard stays empty.
"""

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from eks_ddp.infra.addons import helm
from eks_ddp.infra.aws.cluster import SYSTEM_LABEL
from eks_ddp.infra.aws.efa_node_group import EFA_LABEL, GPU_LABEL, Taint
from eks_ddp.infra.aws.iam import irsa_role
from eks_ddp.infra.facts import versions
from eks_ddp.infra.options import waits_for

COMPONENT = "PrometheusMonitoring"
NAMESPACE = "monitoring"
DASHBOARDS = Path(__file__).resolve().parent / "dashboards"
DASHBOARD_LABEL = {"grafana_dashboard": "1"}  # kube-prometheus-stack 88.5.3 values.yaml: grafana.sidecar.dashboards
EFA_EXPORTER_PORT = 9101  # host network: beside kube-prometheus-stack's node exporter on 9100

DCGM_COUNTERS = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all lanes."),
)
EFA_COUNTERS = (
    "rx_bytes",
    "tx_bytes",
    "rdma_read_bytes",
    "rdma_write_bytes",
    "rx_drops",
    "retrans_pkts",
    "retrans_timeout_events",
    "impaired_remote_conn_events",
)


# Prometheus' service account in kube-prometheus-stack (`<release>-prometheus`; the release is named after the chart).
PROMETHEUS_SERVICE_ACCOUNT = "kube-prometheus-stack-prometheus"
REMOTE_WRITE_POLICY = "arn:aws:iam::aws:policy/AmazonPrometheusRemoteWriteAccess"


class ManagedPrometheus(TypedDict):
    """Where Prometheus also writes: an Amazon Managed Service for Prometheus workspace the stack creates."""

    oidc_provider_arn: pulumi.Input[str]
    """The cluster's IAM OIDC provider (Prometheus writes with an IRSA role)."""
    oidc_issuer: pulumi.Input[str]
    """The cluster's OIDC issuer."""
    tags: NotRequired[dict[str, str]]
    """Tags for the workspace and the role."""


class PrometheusMonitoringArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    gpu_node_taints: NotRequired[Sequence[Taint]]
    """Given (even empty) when the cluster has GPU nodes: the DCGM exporter runs on them, tolerating these taints."""
    efa_node_taints: NotRequired[Sequence[Taint]]
    """Given (even empty) when the cluster has EFA nodes: the EFA exporter runs on them (with `efa_exporter_image`),
    tolerating these taints."""
    efa_exporter_image: NotRequired[str]
    """AWS's EFA node exporter, built from awsome-distributed-training (none is published)."""
    managed_prometheus: NotRequired[ManagedPrometheus]
    """Also remote-write every sample to a new Amazon Managed Service for Prometheus workspace."""


def stack_values() -> dict[str, Any]:
    """kube-prometheus-stack on the system nodes, selecting every PodMonitor and ServiceMonitor (by default it
    selects only those labelled with its release: ours and the DCGM exporter's would be ignored)."""
    return {
        "prometheus": {
            "prometheusSpec": {
                "nodeSelector": SYSTEM_LABEL,
                "retention": "15d",
                "podMonitorSelectorNilUsesHelmValues": False,
                "serviceMonitorSelectorNilUsesHelmValues": False,
            }
        },
        "alertmanager": {"alertmanagerSpec": {"nodeSelector": SYSTEM_LABEL}},
        "prometheusOperator": {
            "nodeSelector": SYSTEM_LABEL,
            "admissionWebhooks": {"patch": {"nodeSelector": SYSTEM_LABEL}},
        },
        "kube-state-metrics": {"nodeSelector": SYSTEM_LABEL},
        # No adminPassword: the Grafana chart generates one into a Secret (kubectl get secret ... admin-password).
        "grafana": {"nodeSelector": SYSTEM_LABEL},
    }


def dcgm_values(taints: Sequence[Taint]) -> dict[str, Any]:
    """The exporter on our GPU nodes only, tolerating their taints, reading DCGM_COUNTERS. Chart 4.8.2 writes
    `customMetrics` to its ConfigMap and mounts it over the file its default `-f` argument names (deployment/
    values.yaml extraConfigMapVolumes, extraVolumeMounts), so the counters need no `-m <namespace>:<configmap>`: that
    reads through the API, with a token the chart mounts only for pod labels or DRA, and without it the exporter
    exits (internal/pkg/counters/counter_config.go)."""
    return {
        "nodeSelector": {GPU_LABEL: "true"},
        "tolerations": helm.tolerations(taints),
        "customMetrics": "\n".join(", ".join(row) for row in DCGM_COUNTERS) + "\n",
        "serviceMonitor": {"enabled": True, "interval": "15s"},
    }


def efa_exporter_values(image: str, taints: Sequence[Taint]) -> dict[str, Any]:
    """The node-exporter chart with AWS's image, only its `amazonefa` collector, on our EFA nodes."""
    repository, _, tag = image.rpartition(":")
    registry, _, path = repository.partition("/")
    return {
        "image": {"registry": registry, "repository": path, "tag": tag},
        "extraArgs": ["--collector.disable-defaults", "--collector.amazonefa"],
        # Its collector reads /sys only. Without the host's root file system, the chart (4.56.1,
        # templates/daemonset.yaml) never compares the image tag as a version, which fails to render with a tag
        # such as `latest`, the one AWS's Makefile gives the image.
        "hostRootFsMount": {"enabled": False},
        "service": {"port": EFA_EXPORTER_PORT, "targetPort": EFA_EXPORTER_PORT},
        "nodeSelector": {EFA_LABEL: "true"},
        "tolerations": helm.tolerations(taints),
        "prometheus": {"monitor": {"enabled": True}},
    }


def dashboards() -> dict[str, dict[str, Any]]:
    """infra/addons/dashboards/*.json by file name."""
    return {path.name: json.loads(path.read_text()) for path in sorted(DASHBOARDS.glob("*.json"))}


def remote_write(
    values: dict[str, Any], endpoint: pulumi.Input[str], region: pulumi.Input[str], role_arn: pulumi.Input[str]
) -> dict[str, Any]:
    """`values` with Prometheus writing to the workspace, signed with SigV4 by its IRSA role."""
    url = pulumi.Output.concat(endpoint, "api/v1/remote_write")  # the workspace endpoint ends in "/"
    prometheus = values["prometheus"]
    spec = {**prometheus["prometheusSpec"], "remoteWrite": [{"url": url, "sigv4": {"region": region}}]}
    account = {"annotations": {"eks.amazonaws.com/role-arn": role_arn}}
    return {**values, "prometheus": {**prometheus, "prometheusSpec": spec, "serviceAccount": account}}


class PrometheusMonitoring(pulumi.ComponentResource):
    release: k8s.helm.v3.Release
    """kube-prometheus-stack: PodMonitors and ServiceMonitors must depend on it (it installs their CRDs)."""
    workspace_endpoint: pulumi.Output[str] | None
    """The managed Prometheus workspace's endpoint (None without one): Grafana or `awscurl` query it."""

    def __init__(self, name: str, args: PrometheusMonitoringArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        provider, after = args["provider"], waits_for(opts)
        values, self.workspace_endpoint = stack_values(), None
        managed = args.get("managed_prometheus")
        if managed is not None:
            values, self.workspace_endpoint = self._workspace(name, managed, values)
        # Helm makes the namespace, privileged (unlabelled): the node exporter needs the host's network, PIDs and
        # paths, which baseline forbids; `pulumi destroy` leaves it (docs/deploy.md, "Destroy").
        self.release = helm.release(f"{name}-stack", self, provider, versions.KUBE_PROMETHEUS_STACK_CHART, NAMESPACE,
                                    values, after, create_namespace=True)
        if "gpu_node_taints" in args:
            helm.release(
                f"{name}-dcgm",
                self,
                provider,
                versions.DCGM_EXPORTER_CHART,
                NAMESPACE,
                dcgm_values(args["gpu_node_taints"]),
                [self.release],
                create_namespace=True,
            )
        if "efa_node_taints" in args:
            image = args.get("efa_exporter_image")
            if image:
                values = efa_exporter_values(image, args["efa_node_taints"])
                helm.release(f"{name}-efa", self, provider, versions.NODE_EXPORTER_CHART, NAMESPACE, values,
                             [self.release], create_namespace=True)
            else:
                pulumi.log.warn(
                    f"{COMPONENT} {name}: no EFA counters: set eks-ddp:efaExporterImage to an image built from "
                    "aws-samples/awsome-distributed-training 4.validation_and_observability/3.efa-node-exporter",
                    self,
                )
        opts_in_namespace = pulumi.ResourceOptions(parent=self, provider=provider, depends_on=[self.release])
        for file_name, dashboard in dashboards().items():
            k8s.core.v1.ConfigMap(
                f"{name}-dashboard-{file_name.removesuffix('.json')}",
                metadata={
                    "name": f"eks-ddp-{file_name.removesuffix('.json')}",
                    "namespace": NAMESPACE,
                    "labels": DASHBOARD_LABEL,
                },
                data={file_name: json.dumps(dashboard, indent=1)},
                opts=opts_in_namespace,
            )
        self.register_outputs({"workspace_endpoint": self.workspace_endpoint})

    def _workspace(
        self, name: str, managed: ManagedPrometheus, values: dict[str, Any]
    ) -> tuple[dict[str, Any], pulumi.Output[str]]:
        child, tags = pulumi.ResourceOptions(parent=self), dict(managed.get("tags", {}))
        workspace = aws.amp.Workspace(f"{name}-workspace", alias=name, tags=tags, opts=child)
        role = irsa_role(
            f"{name}-writer",
            self,
            managed["oidc_provider_arn"],
            managed["oidc_issuer"],
            NAMESPACE,
            PROMETHEUS_SERVICE_ACCOUNT,
            tags,
        )
        aws.iam.RolePolicyAttachment(
            f"{name}-writer-policy", role=role.name, policy_arn=REMOTE_WRITE_POLICY, opts=child
        )
        region = aws.get_region_output(opts=pulumi.InvokeOutputOptions(parent=self)).region
        return remote_write(values, workspace.prometheus_endpoint, region, role.arn), workspace.prometheus_endpoint
