"""The pods each add-on of a stack runs, read from its pinned upstream chart or manifest, with our values applied:
the local cluster's stand-ins for the charts and EKS managed add-ons that no Go module ships (the cloud boundary).

Under Pulumi's mocks a Helm release, an EKS managed add-on or a kustomize/yaml install is one resource: the pods its
chart or manifest creates never exist, yet they take room on nodes and their DaemonSets land on training nodes. Each
chart was read at the version the stack pins, and what its templates make of its values is kept below as one small
table: the chart's own values (only what scheduling reads) and, per workload, which of them its template reads.
`addon_workloads` merges a release's `values` (an add-on's `configurationValues`) over the chart's as Helm does and
renders each workload's pod. A pin that moves away from its table, or an add-on without one, raises AddonTableError:
the new version's templates must be read first. Where a Go module ships the chart, Helm itself renders it
(tests/cluster/charts.py), and manifests are applied as they are (tests/cluster/manifests.py): they have no table.

Workload names assume the release is named after its chart, as infra.addons.helm.release names every release.
"""

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eks_ddp.engine_models.base import Deployment, located
from eks_ddp.tools.mocking import Registration
from tests.cluster import charts

Values = Mapping[str, Any]
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
EKS_ADDON = "aws:eks/addon:Addon"
KUSTOMIZE = "kubernetes:kustomize/v2:Directory"
YAML_FILE = "kubernetes:yaml/v2:ConfigFile"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


class AddonTableError(Exception):
    """An add-on installed at a version its table was not read at, or one without a table."""


@dataclass(frozen=True)
class Workload:
    owner: str
    """The registration it comes from, as engine_models.base.located spells it."""
    name: str
    """The workload's name, as the chart renders it."""
    kind: str
    """DaemonSet, Deployment or StatefulSet."""
    replicas: int
    """Pods of a Deployment or StatefulSet; 0 for a DaemonSet (one on every node it admits)."""
    pod: dict[str, Any]
    """Its pod spec, only what the scheduler filters on: containers and initContainers with `resources.requests`
    (an empty one asks for nothing, as a pod without requests does), nodeSelector, tolerations, the required
    affinity terms and the DoNotSchedule topologySpreadConstraints."""
    source: str
    """Repository, files and version its defaults come from."""


@dataclass(frozen=True)
class Container:
    name: str
    resources: tuple[str, ...] = ()
    """Values paths of its `resources`, the first non-empty one taken (the templates' `default`); none: no requests."""
    init: bool = False
    when: str = ""
    """A values path that must be true for the template to write it."""
    requests: Mapping[str, str] = field(default_factory=dict)
    """Requests its operator adds where the values set none."""


@dataclass(frozen=True)
class Template:
    """One workload of a chart or manifest, as its template reads the chart's values."""

    name: str
    kind: str
    containers: tuple[Container, ...]
    at: str = ""
    """Values path of its nodeSelector, tolerations, affinity and topologySpreadConstraints ("": the root)."""
    replicas: str | int = 0
    """A values path, or the count its template writes."""
    when: str = ""
    """A values path that must be true for the template to render it (a subchart's condition, an `if`)."""
    node_selector: Mapping[str, str] = field(default_factory=dict)
    """Labels its template writes beside the values' nodeSelector."""
    tolerations: tuple[Mapping[str, Any], ...] = ()
    """Tolerations its template writes before the values'."""
    affinity: Mapping[str, Any] = field(default_factory=dict)
    """Affinity its template writes, the values' merged over it."""
    tolerations_from: tuple[str, ...] = ()
    """Values paths of its tolerations, the first one set taken (default: `<at>.tolerations`)."""
    derive: Callable[[Values], dict[str, Any]] | None = None
    """Pod fields its template computes from chart-specific values, in place of the rendered ones."""
    source: str = ""
    """Where it was read, beyond the chart's own source."""


@dataclass(frozen=True)
class Chart:
    name: str
    version: str
    """The version read: a Helm chart's, a managed add-on's upstream release, a manifest's tag."""
    source: str
    values: Values
    """The chart's values that its workloads' scheduling reads, as its values.yaml (and subcharts') set them."""
    workloads: tuple[Template, ...]


def _in(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def _not_in(key: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": "NotIn", "values": list(values)}


def _required(*expressions: Mapping[str, Any]) -> dict[str, Any]:
    """A required node affinity of one term."""
    return {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": list(expressions)}]}}}


def _requests(cpu: str = "", memory: str = "") -> dict[str, Any]:
    return {"requests": {name: value for name, value in (("cpu", cpu), ("memory", memory)) if value}}


LINUX = {"kubernetes.io/os": "linux"}
EVERYTHING = {"operator": "Exists"}
CRITICAL_ADDONS = {"key": "CriticalAddonsOnly", "operator": "Exists"}
NO_EXECUTE_300 = {"effect": "NoExecute", "operator": "Exists", "tolerationSeconds": 300}
COMPUTE_TYPE = "eks.amazonaws.com/compute-type"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARCH = _in("kubernetes.io/arch", "amd64", "arm64")

# --- Helm charts the stack installs (infra.facts.versions), by chart name ---------------------------------------------

CLUSTER_AUTOSCALER = Chart(
    "cluster-autoscaler",
    "9.59.0",
    "kubernetes/autoscaler cluster-autoscaler/charts/cluster-autoscaler 9.59.0 (tag cluster-autoscaler-chart-9.59.0): "
    "values.yaml, templates/deployment.yaml",
    {"replicaCount": 1, "resources": {}, "nodeSelector": {}, "tolerations": [], "affinity": {}},
    (
        Template(
            "cluster-autoscaler-aws-cluster-autoscaler",
            "Deployment",
            (Container("aws-cluster-autoscaler", ("resources",)),),
            replicas="replicaCount",
        ),
    ),
)

def _efa_plugin_affinity(values: Values) -> dict[str, Any]:
    """templates/daemonset.yaml: one required term per `supportedInstanceLabels.keys` entry (In its `values`), the
    last also keeping the plugin off EKS Auto Mode nodes."""
    labels = values.get("supportedInstanceLabels")
    if not labels or "values" not in labels:
        raise AddonTableError(
            "aws-efa-k8s-device-plugin: the chart's own supportedInstanceLabels list is not kept here; "
            "set it (infra/addons/efa_device_plugin.py sets it from the catalogue)"
        )
    terms = [{"matchExpressions": [_in(key, *labels["values"])]} for key in labels.get("keys", [])]
    if terms:
        terms[-1]["matchExpressions"].append(_not_in(COMPUTE_TYPE, "auto"))
    return {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": terms}}}}


EFA_DEVICE_PLUGIN = Chart(
    "aws-efa-k8s-device-plugin",
    "v0.5.30",
    "aws/eks-charts stable/aws-efa-k8s-device-plugin v0.5.30 (commit bfe91c4): values.yaml, templates/daemonset.yaml",
    {
        "supportedInstanceLabels": {"keys": [INSTANCE_TYPE]},
        "resources": _requests("10m", "20Mi"),
        "nodeSelector": {},
        "tolerations": [],
    },
    (
        Template(
            "aws-efa-k8s-device-plugin",
            "DaemonSet",
            (Container("aws-efa-k8s-device-plugin", ("resources",)),),
            tolerations=(CRITICAL_ADDONS,),
            derive=_efa_plugin_affinity,
        ),
    ),
)

NVIDIA_DEVICE_PLUGIN = Chart(
    "nvidia-device-plugin",
    "0.20.0",
    "NVIDIA/k8s-device-plugin deployments/helm/nvidia-device-plugin (tag v0.20.0): values.yaml, "
    "templates/daemonset-device-plugin.yml, templates/daemonset-mps-control-daemon.yml (the config-manager init "
    "and sidecar containers only with a config map; gpu-feature-discovery only with gfd.enabled)",
    {
        "devicePlugin": {"enabled": True},
        "resources": {},
        "nodeSelector": {},
        "affinity": {
            "nodeAffinity": {
                REQUIRED: {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [_in("feature.node.kubernetes.io/pci-10de.present", "true")]},
                        {"matchExpressions": [_in("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA")]},
                        {"matchExpressions": [_in("nvidia.com/gpu.present", "true")]},
                    ]
                }
            }
        },
        "tolerations": [CRITICAL_ADDONS, {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
    (
        Template(
            "nvidia-device-plugin",
            "DaemonSet",
            (Container("nvidia-device-plugin-ctr", ("resources",)),),
            when="devicePlugin.enabled",
        ),
        # Only where gpu-feature-discovery labels a node MPS-capable: none of ours.
        Template(
            "nvidia-device-plugin-mps-control-daemon",
            "DaemonSet",
            (
                Container("mps-control-daemon-mounts", ("resources",), init=True),
                Container("mps-control-daemon-ctr", ("resources",)),
            ),
            when="devicePlugin.enabled",
            node_selector={"nvidia.com/mps.capable": "true"},
        ),
    ),
)

# aws-neuron/neuron-helm-charts 1.9.0 (commit b77a6f9) values.yaml `neuronInstances`, which templates/_helpers.tpl
# substitutes into the plugin's required node affinity (`__NEURON_INSTANCES__`, on the instance-type label).
NEURON_INSTANCES = (
    "trn1.2xlarge trn1.32xlarge trn1n.32xlarge trn2.3xlarge trn2.48xlarge trn2u.48xlarge trn3.48xlarge trn3e.24xlarge "
    "inf1.xlarge inf1.2xlarge inf1.6xlarge inf1.24xlarge inf2.xlarge inf2.8xlarge inf2.24xlarge inf2.48xlarge"
).split()

NEURON_DEVICE_PLUGIN = Chart(
    "neuron-helm-chart",
    "1.9.0",
    "aws-neuron/neuron-helm-charts charts/neuron-helm-chart 1.9.0 (commit b77a6f9): values.yaml, templates/_helpers.tpl, "
    "templates/device-plugin/device-plugin-daemonset.yaml (the scheduler extension, node problem detector, DRA driver "
    "and UltraServer operator only when enabled; eks-ddp enables none)",
    {
        "devicePlugin": {
            "enabled": True,
            "resources": {},
            "nodeSelector": {},
            "tolerations": [
                CRITICAL_ADDONS,
                {"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"},
                {
                    "key": "sagemaker.amazonaws.com/node-health-status",
                    "operator": "Equal",
                    "value": "Unschedulable",
                    "effect": "NoSchedule",
                },
            ],
            "affinity": _required(
                _in(INSTANCE_TYPE, *NEURON_INSTANCES), _not_in(COMPUTE_TYPE, "fargate", "hybrid", "auto")
            ),
        },
        "npd": {
            "enabled": True,
            "nodeSelector": {},
            "tolerations": [
                {"effect": "NoSchedule", "operator": "Exists"},
                {"effect": "NoExecute", "operator": "Exists"},
            ],
            "nodeProblemDetector": {"resources": _requests("10m", "80Mi")},
        },
    },
    (
        Template(
            "neuron-device-plugin",
            "DaemonSet",
            (Container("neuron-device-plugin", ("devicePlugin.resources",)),),
            at="devicePlugin",
            when="devicePlugin.enabled",
        ),
        # Chart default on: a node problem detector on every node that tolerates it. Turned off by eks-ddp, kept here
        # so a release that leaves it on is placed as the cluster would place it.
        Template(
            "node-problem-detector",
            "DaemonSet",
            (Container("node-problem-detector", ("npd.nodeProblemDetector.resources",)),),
            at="npd",
            when="npd.enabled",
        ),
    ),
)

DCGM_EXPORTER = Chart(
    "dcgm-exporter",
    "4.8.2",
    "NVIDIA/dcgm-exporter deployment/ chart 4.8.2 (tag 4.5.3-4.8.2): values.yaml, templates/daemonset.yaml",
    {
        "resources": _requests("100m", "128Mi"),
        "nodeSelector": {},
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {},
    },
    (Template("dcgm-exporter", "DaemonSet", (Container("exporter", ("resources",)),)),),
)

NODE_EXPORTER_VALUES = {
    "resources": {},
    "nodeSelector": LINUX,
    "tolerations": [{"effect": "NoSchedule", "operator": "Exists"}],
    "affinity": {},
}


def _node_exporter(name: str, at: str, when: str = "") -> Template:
    """prometheus-community/helm-charts charts/prometheus-node-exporter 4.56.1 templates/daemonset.yaml: its
    _helpers.tpl defaultAffinity, merged with the values' (kube-rbac-proxy and the permission-fix init container
    are off by default)."""
    return Template(
        name,
        "DaemonSet",
        (Container("node-exporter", (f"{at}.resources" if at else "resources",)),),
        at=at,
        when=when,
        affinity=_required(_not_in(COMPUTE_TYPE, "fargate"), _not_in("type", "virtual-kubelet")),
        source="prometheus-node-exporter 4.56.1 (tag prometheus-node-exporter-4.56.1): values.yaml, "
        "templates/daemonset.yaml, templates/_helpers.tpl",
    )


NODE_EXPORTER = Chart(
    "prometheus-node-exporter",
    "4.56.1",
    "prometheus-community/helm-charts charts/prometheus-node-exporter",
    NODE_EXPORTER_VALUES,
    (_node_exporter("prometheus-node-exporter", ""),),
)

RELOADER = ("prometheusOperator.prometheusConfigReloader.resources",)  # its requests become the operator's flags
KUBE_PROMETHEUS_STACK = Chart(
    "kube-prometheus-stack",
    "88.5.3",
    "prometheus-community/helm-charts charts/kube-prometheus-stack 88.5.3 (tag kube-prometheus-stack-88.5.3): "
    "values.yaml, Chart.yaml (subcharts), templates/prometheus-operator/deployment.yaml (the admission webhook's "
    "Deployment is off; its certificate Jobs run during the install only)",
    {
        "prometheusOperator": {
            "enabled": True,
            "resources": {},
            "nodeSelector": {},
            "tolerations": [],
            "affinity": {},
            "prometheusConfigReloader": {"resources": {}},
        },
        # The podAntiAffinity "soft" of both only prefers distinct hosts.
        "prometheus": {
            "enabled": True,
            "prometheusSpec": {"replicas": 1, "resources": {}, "nodeSelector": {}, "tolerations": [], "affinity": {}},
        },
        "alertmanager": {
            "enabled": True,
            "alertmanagerSpec": {"replicas": 1, "resources": {}, "nodeSelector": {}, "tolerations": [], "affinity": {}},
        },
        "grafana": {
            "enabled": True,
            "replicas": 1,
            "resources": {},
            "nodeSelector": {},
            "tolerations": [],
            "affinity": {},
            "sidecar": {"resources": {}, "dashboards": {"enabled": True}, "datasources": {"enabled": True}},
        },
        "kubeStateMetrics": {"enabled": True},
        "kube-state-metrics": {"replicas": 1, "resources": {}, "nodeSelector": {}, "tolerations": [], "affinity": {}},
        "nodeExporter": {"enabled": True},
        "prometheus-node-exporter": NODE_EXPORTER_VALUES,
    },
    (
        Template(
            "kube-prometheus-stack-operator",
            "Deployment",
            (Container("kube-prometheus-stack", ("prometheusOperator.resources",)),),
            at="prometheusOperator",
            replicas=1,
            when="prometheusOperator.enabled",
        ),
        Template(
            "prometheus-kube-prometheus-stack-prometheus",
            "StatefulSet",
            (
                Container("init-config-reloader", RELOADER, init=True),
                Container("prometheus", ("prometheus.prometheusSpec.resources",)),
                Container("config-reloader", RELOADER),
            ),
            at="prometheus.prometheusSpec",
            replicas="prometheus.prometheusSpec.replicas",
            when="prometheus.enabled",
            source="templates/prometheus/prometheus.yaml; prometheus-operator/prometheus-operator v0.93.0 (the "
            "chart's v0.93.1 is a patch later) pkg/prometheus/server/statefulset.go: no default requests",
        ),
        Template(
            "alertmanager-kube-prometheus-stack-alertmanager",
            "StatefulSet",
            (
                Container("init-config-reloader", RELOADER, init=True),
                Container("alertmanager", ("alertmanager.alertmanagerSpec.resources",), requests={"memory": "200Mi"}),
                Container("config-reloader", RELOADER),
            ),
            at="alertmanager.alertmanagerSpec",
            replicas="alertmanager.alertmanagerSpec.replicas",
            when="alertmanager.enabled",
            source="templates/alertmanager/alertmanager.yaml; prometheus-operator v0.93.0 "
            "pkg/alertmanager/statefulset.go: 200Mi of memory unless the spec requests some",
        ),
        Template(
            "kube-prometheus-stack-grafana",
            "Deployment",
            (
                Container(
                    "grafana-sc-dashboard", ("grafana.sidecar.resources",), when="grafana.sidecar.dashboards.enabled"
                ),
                Container(
                    "grafana-sc-datasources", ("grafana.sidecar.resources",), when="grafana.sidecar.datasources.enabled"
                ),
                Container("grafana", ("grafana.resources",)),
            ),
            at="grafana",
            replicas="grafana.replicas",
            when="grafana.enabled",
            source="grafana-community/helm-charts charts/grafana 12.11.1 (tag grafana-12.11.1): values.yaml, "
            "templates/_pod.tpl (no init containers without persistence)",
        ),
        Template(
            "kube-prometheus-stack-kube-state-metrics",
            "Deployment",
            (Container("kube-state-metrics", ("kube-state-metrics.resources",)),),
            at="kube-state-metrics",
            replicas="kube-state-metrics.replicas",
            when="kubeStateMetrics.enabled",
            source="kube-state-metrics 8.4.0 (tag kube-state-metrics-8.4.0): values.yaml, templates/deployment.yaml",
        ),
        _node_exporter(
            "kube-prometheus-stack-prometheus-node-exporter", "prometheus-node-exporter", "nodeExporter.enabled"
        ),
    ),
)


def _fsx_node_tolerations(values: Values) -> dict[str, Any]:
    """templates/node-daemonset.yaml: `tolerateAllTaints` tolerates everything, else the values' and its own
    agent-not-ready taint."""
    node = values.get("node") or {}
    if node.get("tolerateAllTaints"):
        return {"tolerations": [EVERYTHING]}
    agent = {"key": "fsx.csi.aws.com/agent-not-ready", "operator": "Exists"}
    return {"tolerations": [*(node.get("tolerations") or []), agent]}


FSX_CSI_DRIVER = Chart(
    "aws-fsx-csi-driver",
    "1.11.0",
    "kubernetes-sigs/aws-fsx-csi-driver charts/aws-fsx-csi-driver 1.11.0 (tag helm-chart-aws-fsx-csi-driver-1.11.0, "
    "driver v1.4.0): values.yaml, templates/controller-deployment.yaml, templates/node-daemonset.yaml",
    {
        "controller": {
            "replicaCount": 2,
            "resources": {},
            "nodeSelector": {},
            "tolerations": [CRITICAL_ADDONS, NO_EXECUTE_300],
        },
        "node": {
            "resources": {},
            "nodeSelector": {},
            "tolerateAllTaints": True,
            "tolerations": [NO_EXECUTE_300],
            "affinity": _required(_not_in(COMPUTE_TYPE, "fargate")),
        },
        "sidecars": {
            name: {"resources": {}} for name in ("provisioner", "resizer", "livenessProbe", "nodeDriverRegistrar")
        },
    },
    (
        Template(
            "fsx-csi-controller",
            "Deployment",
            (
                Container("fsx-plugin", ("controller.resources",)),
                Container("csi-provisioner", ("sidecars.provisioner.resources", "controller.resources")),
                Container("csi-resizer", ("sidecars.resizer.resources", "controller.resources")),
                Container("liveness-probe", ("sidecars.livenessProbe.resources", "controller.resources")),
            ),
            at="controller",
            replicas="controller.replicaCount",
            node_selector=LINUX,
        ),
        Template(
            "fsx-csi-node",
            "DaemonSet",
            (
                Container("fsx-plugin", ("node.resources",)),
                Container("node-driver-registrar", ("sidecars.nodeDriverRegistrar.resources", "node.resources")),
                Container("liveness-probe", ("sidecars.livenessProbe.resources", "node.resources")),
            ),
            at="node",
            node_selector=LINUX,
            derive=_fsx_node_tolerations,
        ),
    ),
)

# It has no `node.tolerateAllTaints` (the value infra/storage/efs.py sets is ignored); its node tolerations already
# tolerate everything.
EFS_CSI_DRIVER = Chart(
    "aws-efs-csi-driver",
    "3.1.9",
    "kubernetes-sigs/aws-efs-csi-driver charts/aws-efs-csi-driver 3.1.9 (tag helm-chart-aws-efs-csi-driver-3.1.9, "
    "driver 2.1.8): values.yaml, templates/controller-deployment.yaml, templates/node-daemonset.yaml",
    {
        "controller": {
            "replicaCount": 2,
            "resources": {},
            "nodeSelector": {},
            "tolerations": [CRITICAL_ADDONS, {"key": "efs.csi.aws.com/agent-not-ready", "operator": "Exists"}],
            "affinity": {},
        },
        "node": {
            "resources": {},
            "nodeSelector": {},
            "tolerations": [EVERYTHING],
            "affinity": _required(_not_in(COMPUTE_TYPE, "fargate", "hybrid")),
        },
        "sidecars": {name: {"resources": {}} for name in ("csiProvisioner", "livenessProbe", "nodeDriverRegistrar")},
    },
    (
        Template(
            "efs-csi-controller",
            "Deployment",
            (
                Container("efs-plugin", ("controller.resources",)),
                Container("csi-provisioner", ("sidecars.csiProvisioner.resources", "controller.resources")),
                Container("liveness-probe", ("sidecars.livenessProbe.resources", "controller.resources")),
            ),
            at="controller",
            replicas="controller.replicaCount",
            node_selector=LINUX,
        ),
        Template(
            "efs-csi-node",
            "DaemonSet",
            (
                Container("efs-plugin", ("node.resources",)),
                Container("csi-driver-registrar", ("sidecars.nodeDriverRegistrar.resources",)),
                Container("liveness-probe", ("sidecars.livenessProbe.resources",)),
            ),
            at="node",
            node_selector=LINUX,
        ),
    ),
)

CHARTS = {
    chart.name: chart
    for chart in (
        CLUSTER_AUTOSCALER,
        EFA_DEVICE_PLUGIN,
        NVIDIA_DEVICE_PLUGIN,
        NEURON_DEVICE_PLUGIN,
        DCGM_EXPORTER,
        KUBE_PROMETHEUS_STACK,
        NODE_EXPORTER,
        FSX_CSI_DRIVER,
        EFS_CSI_DRIVER,
    )
}

# --- EKS managed add-ons, by add-on name: the open-source charts or manifests they are built from ----------------
# An add-on's configurationValues are its chart's values. With no addonVersion EKS installs its default for the
# cluster's Kubernetes version, which may be older or newer than the version read here.

VPC_CNI = Chart(
    "vpc-cni",
    "v1.23.0",
    "aws/amazon-vpc-cni-k8s charts/aws-vpc-cni 1.23.0 (tag v1.23.0): values.yaml, templates/daemonset.yaml (EKS's "
    "own aws-node of 1.25, eksctl testdata/sample-1.25.json, gave its init container no request)",
    {
        "resources": _requests("25m"),
        "init": {"resources": {}},
        "nodeAgent": {"enabled": True, "resources": {}},
        "nodeSelector": {},
        "tolerations": [EVERYTHING],
        "affinity": _required(
            _in("kubernetes.io/os", "linux"), ARCH, _not_in(COMPUTE_TYPE, "fargate", "hybrid", "auto")
        ),
    },
    (
        Template(
            "aws-node",
            "DaemonSet",
            (
                Container("aws-vpc-cni-init", ("init.resources", "resources"), init=True),
                Container("aws-node", ("resources",)),
                Container("aws-eks-nodeagent", ("nodeAgent.resources", "resources"), when="nodeAgent.enabled"),
            ),
        ),
    ),
)

# EKS publishes no kube-proxy or CoreDNS manifest; eksctl keeps copies of what EKS installs.
KUBE_PROXY = Chart(
    "kube-proxy",
    "v1.25.6",
    "eksctl-io/eksctl pkg/addons/default/testdata/sample-1.25.json (EKS's kube-proxy v1.25.6-minimal-eksbuild.1, "
    "captured 2023-06; no newer copy is published)",
    {
        "resources": _requests("100m"),
        "nodeSelector": {},
        "tolerations": [EVERYTHING],
        "affinity": _required(_in("kubernetes.io/os", "linux"), ARCH, _not_in(COMPUTE_TYPE, "fargate")),
    },
    (Template("kube-proxy", "DaemonSet", (Container("kube-proxy", ("resources",)),)),),
)

# Its preferred pod anti-affinity and ScheduleAnyway zone spread only score nodes.
COREDNS = Chart(
    "coredns",
    "v1.14.3",
    "eksctl-io/eksctl pkg/addons/default/assets/coredns-1.35.json (EKS 1.35's coredns v1.14.3-eksbuild.11, "
    "commit 03c9a0a17 of 2026-08-20)",
    {
        "replicaCount": 2,
        "resources": _requests("100m", "70Mi"),
        "nodeSelector": {},
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}, CRITICAL_ADDONS],
        "affinity": _required(_in("kubernetes.io/os", "linux"), ARCH),
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}
        ],
    },
    (Template("coredns", "Deployment", (Container("coredns", ("resources",)),), replicas="replicaCount"),),
)

POD_IDENTITY_AGENT = Chart(
    "eks-pod-identity-agent",
    "v0.1.37",
    "aws/eks-pod-identity-agent charts/eks-pod-identity-agent 1.2.0 (tag v0.1.37): values.yaml, "
    "templates/daemonset.yaml, hack/testdata/expected_eks_pod_identity_agent_default_helm_template.yaml",
    {
        "init": {"create": True},
        "resources": {},
        "nodeSelector": {},
        "tolerations": [EVERYTHING],
        "affinity": _required(
            _in("kubernetes.io/os", "linux"), ARCH, _not_in(COMPUTE_TYPE, "fargate", "hybrid", "auto")
        ),
    },
    (
        Template(
            "eks-pod-identity-agent",
            "DaemonSet",
            (
                Container("eks-pod-identity-agent-init", init=True, when="init.create"),
                Container("eks-pod-identity-agent", ("resources",)),
            ),
        ),
    ),
)

# dcgmAgent.affinity's instance types (values.yaml), all amd64.
NODE_MONITOR_DCGM_TYPES = """
g3.16xlarge g3.4xlarge g3.8xlarge g3s.xlarge g4dn.12xlarge g4dn.16xlarge g4dn.2xlarge g4dn.4xlarge g4dn.8xlarge
g4dn.metal g4dn.xlarge g5.12xlarge g5.16xlarge g5.24xlarge g5.2xlarge g5.48xlarge g5.4xlarge g5.8xlarge g5.xlarge
g5g.16xlarge g5g.2xlarge g5g.4xlarge g5g.8xlarge g5g.metal g5g.xlarge g6.12xlarge g6.16xlarge g6.24xlarge g6.2xlarge
g6.48xlarge g6.4xlarge g6.8xlarge g6.xlarge g6e.12xlarge g6e.16xlarge g6e.24xlarge g6e.2xlarge g6e.48xlarge g6e.4xlarge
g6e.8xlarge g6e.xlarge g6f.2xlarge g6f.4xlarge g6f.large g6f.xlarge g7.12xlarge g7.24xlarge g7.2xlarge g7.48xlarge
g7.4xlarge g7.8xlarge g7e.12xlarge g7e.24xlarge g7e.2xlarge g7e.48xlarge g7e.4xlarge g7e.8xlarge gr6.4xlarge
gr6.8xlarge gr6f.4xlarge p2.16xlarge p2.8xlarge p2.xlarge p3.16xlarge p3.2xlarge p3.8xlarge p3dn.24xlarge p4d.24xlarge
p4de.24xlarge p5.48xlarge p5.4xlarge p5e.48xlarge p5en.48xlarge p6-b200.48xlarge p6-b300.48xlarge p6e-gb200.36xlarge
p6e-gb300.36xlarge
""".split()
NOT_ON = (
    _not_in(COMPUTE_TYPE, "fargate", "auto", "hybrid"),
    _not_in("sagemaker.amazonaws.com/compute-type", "hyperpod"),
)

# Its DCGM server tolerates nothing (dcgmAgent.tolerations: []): GPU nodes with a taint never get it.
NODE_MONITORING_AGENT = Chart(
    "eks-node-monitoring-agent",
    "v1.7.0",
    "aws/eks-node-monitoring-agent charts/eks-node-monitoring-agent 1.7.0 (tag v1.7.0): values.yaml, "
    "templates/daemonset.yaml, templates/dcgm-daemonset.yaml",
    {
        "nodeAgent": {
            "affinity": _required(*NOT_ON, ARCH),
            "resources": _requests("10m", "30Mi"),
            "tolerations": [EVERYTHING],
            "nodeSelector": {},
        },
        "dcgmAgent": {
            "affinity": _required(
                _in(INSTANCE_TYPE, *NODE_MONITOR_DCGM_TYPES), *NOT_ON, _in("kubernetes.io/arch", "amd64")
            ),
            "resources": {},
            "tolerations": [],
            "nodeSelector": {},
        },
    },
    (
        Template(
            "eks-node-monitoring-agent",
            "DaemonSet",
            (Container("eks-node-monitoring-agent", ("nodeAgent.resources",)),),
            at="nodeAgent",
            node_selector=LINUX,
        ),
        Template(
            "dcgm-server",
            "DaemonSet",
            (Container("eks-node-monitoring-agent-dcgm", ("dcgmAgent.resources",)),),
            at="dcgmAgent",
            node_selector=LINUX,
        ),
    ),
)

# dcgmExporter.affinity's and neuronMonitor.affinity's instance types (values.yaml), without the SageMaker `ml.`
# names no EKS node carries.
CLOUDWATCH_GPU_TYPES = """
g3.4xlarge g3.8xlarge g3.16xlarge g3s.xlarge g4ad.2xlarge g4ad.4xlarge g4ad.8xlarge g4ad.16xlarge g4ad.xlarge
g4dn.2xlarge g4dn.4xlarge g4dn.8xlarge g4dn.12xlarge g4dn.16xlarge g4dn.metal g4dn.xlarge g5.2xlarge g5.4xlarge
g5.8xlarge g5.12xlarge g5.16xlarge g5.24xlarge g5.48xlarge g5.xlarge g5g.2xlarge g5g.4xlarge g5g.8xlarge g5g.16xlarge
g5g.metal g5g.xlarge g6.2xlarge g6.4xlarge g6.8xlarge g6.12xlarge g6.16xlarge g6.24xlarge g6.48xlarge g6.xlarge
g6e.2xlarge g6e.4xlarge g6e.8xlarge g6e.12xlarge g6e.16xlarge g6e.24xlarge g6e.48xlarge g6e.xlarge gr6.4xlarge
gr6.8xlarge p2.8xlarge p2.16xlarge p2.xlarge p3.2xlarge p3.8xlarge p3.16xlarge p3dn.24xlarge p4d.24xlarge p4de.24xlarge
p5.48xlarge p5e.48xlarge p5en.48xlarge p6-b200.48xlarge p6-b300.48xlarge p6e-gb200.36xlarge
""".split()
CLOUDWATCH_NEURON_TYPES = """
trn1.2xlarge trn1.32xlarge trn1n.32xlarge trn2.3xlarge trn2.48xlarge trn2a.48xlarge trn2n.48xlarge trn2u.48xlarge
inf1.xlarge inf1.2xlarge inf1.6xlarge inf1.24xlarge inf2.xlarge inf2.8xlarge inf2.24xlarge inf2.48xlarge
""".split()
NOT_FARGATE = _required(_not_in(COMPUTE_TYPE, "fargate"))

# Each component takes the root `tolerations` (everything) unless it sets its own (_helpers.tpl common.tolerations);
# the agent's DaemonSet is made by the CloudWatch agent operator (aws/amazon-cloudwatch-agent-operator
# internal/manifests/collector/daemonset.go) from the chart's AmazonCloudWatchAgent, the cluster scraper agent only
# with otelContainerInsights; the Windows DaemonSets select Windows nodes.
CLOUDWATCH_OBSERVABILITY = Chart(
    "amazon-cloudwatch-observability",
    "6.4.0",
    "aws-observability/helm-charts charts/amazon-cloudwatch-observability 6.4.0 (tag "
    "amazon-cloudwatch-observability-6.4.0): values.yaml, templates/operator-deployment.yaml, templates/linux/",
    {
        "replicaCount": 1,
        "tolerations": [EVERYTHING],
        "manager": {"resources": _requests("100m", "64Mi"), "tolerations": [], "affinity": {}, "nodeSelector": LINUX},
        "agent": {
            "enabled": True,
            "resources": _requests("250m", "128Mi"),
            "affinity": NOT_FARGATE,
            "nodeSelector": LINUX,
        },
        "dcgmExporter": {
            "enabled": True,
            "resources": _requests("250m", "128Mi"),
            "affinity": _required(_in(INSTANCE_TYPE, *CLOUDWATCH_GPU_TYPES), _not_in(COMPUTE_TYPE, "fargate")),
            "nodeSelector": LINUX,
        },
        "neuronMonitor": {
            "enabled": True,
            "resources": _requests("256m", "128Mi"),
            "affinity": _required(_in(INSTANCE_TYPE, *CLOUDWATCH_NEURON_TYPES), _not_in(COMPUTE_TYPE, "fargate")),
            "nodeSelector": LINUX,
        },
        "containerLogs": {
            "enabled": True,
            "fluentBit": {"resources": _requests("50m", "25Mi"), "affinity": NOT_FARGATE, "nodeSelector": LINUX},
        },
    },
    (
        Template(
            "amazon-cloudwatch-observability-controller-manager",
            "Deployment",
            (Container("manager", ("manager.resources",)),),
            at="manager",
            replicas="replicaCount",
            tolerations_from=("manager.tolerations", "tolerations"),
        ),
        Template(
            "cloudwatch-agent",
            "DaemonSet",
            (Container("otc-container", ("agent.resources",)),),
            at="agent",
            when="agent.enabled",
            tolerations_from=("agent.tolerations", "tolerations"),
        ),
        Template(
            "dcgm-exporter",
            "DaemonSet",
            (Container("dcgm-exporter", ("dcgmExporter.resources",)),),
            at="dcgmExporter",
            when="dcgmExporter.enabled",
            tolerations_from=("dcgmExporter.tolerations", "tolerations"),
        ),
        Template(
            "neuron-monitor",
            "DaemonSet",
            (Container("neuron-monitor", ("neuronMonitor.resources",)),),
            at="neuronMonitor",
            when="neuronMonitor.enabled",
            tolerations_from=("neuronMonitor.tolerations", "tolerations"),
        ),
        Template(
            "fluent-bit",
            "DaemonSet",
            (Container("fluent-bit", ("containerLogs.fluentBit.resources",)),),
            at="containerLogs.fluentBit",
            when="containerLogs.enabled",
            tolerations_from=("containerLogs.fluentBit.tolerations", "tolerations"),
        ),
    ),
)

ADDONS = {
    addon.name: addon
    for addon in (VPC_CNI, KUBE_PROXY, COREDNS, POD_IDENTITY_AGENT, NODE_MONITORING_AGENT, CLOUDWATCH_OBSERVABILITY)
}

def _get(values: Values, path: str) -> Any:
    """The value at a dotted path (None where it is missing); "" is the whole."""
    found: Any = values
    for key in path.split(".") if path else ():
        found = found.get(key) if isinstance(found, Mapping) else None
    return found


def _merge(base: Values, over: Values) -> dict[str, Any]:
    """Helm's coalescing of a chart's values with the ones given (helm/helm v3 pkg/chartutil/coalesce.go): maps merge
    key by key, lists and scalars are replaced, and null removes the chart's key."""
    merged = dict(base)
    for key, value in over.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _holds(values: Values, path: str) -> bool:
    return not path or bool(_get(values, path))


def _container(container: Container, values: Values) -> dict[str, Any]:
    resources = next((found for found in (_get(values, path) for path in container.resources) if found), {})
    requests = {**container.requests, **{name: str(v) for name, v in (resources.get("requests") or {}).items()}}
    return {"name": container.name, "resources": {"requests": requests}}


def _scheduling_only(pod: dict[str, Any]) -> dict[str, Any]:
    """The filters kube-scheduler applies: required affinity terms and DoNotSchedule spread constraints (preferred
    terms and ScheduleAnyway constraints only score nodes)."""
    affinity = pod["affinity"]
    required = {kind: {REQUIRED: terms[REQUIRED]} for kind, terms in affinity.items() if terms.get(REQUIRED)}
    spread = [c for c in pod["topologySpreadConstraints"] if c.get("whenUnsatisfiable") == "DoNotSchedule"]
    return {**pod, "affinity": required, "topologySpreadConstraints": spread}


def _pod(template: Template, values: Values) -> dict[str, Any]:
    at = _get(values, template.at) or {}
    paths = template.tolerations_from or (f"{template.at}.tolerations" if template.at else "tolerations",)
    tolerations = next((found for found in (_get(values, path) for path in paths) if found is not None), [])
    written = [c for c in template.containers if _holds(values, c.when)]
    pod = {
        "containers": [_container(c, values) for c in written if not c.init],
        "initContainers": [_container(c, values) for c in written if c.init],
        "nodeSelector": {**template.node_selector, **(at.get("nodeSelector") or {})},
        "tolerations": [*template.tolerations, *tolerations],
        "affinity": _merge(template.affinity, at.get("affinity") or {}),
        "topologySpreadConstraints": list(at.get("topologySpreadConstraints") or []),
    }
    if template.derive is not None:
        pod.update(template.derive(values))
    return _scheduling_only(pod)


def _replicas(template: Template, values: Values) -> int:
    if template.kind == "DaemonSet":
        return 0
    return int(_get(values, template.replicas) if isinstance(template.replicas, str) else template.replicas)


def render(chart: Chart, values: Values, owner: str) -> list[Workload]:
    """The chart's workloads with `values` (what a release or an add-on sends) merged over the chart's own."""
    merged = _merge(chart.values, values)
    return [
        Workload(
            owner,
            template.name,
            template.kind,
            _replicas(template, merged),
            _pod(template, merged),
            f"{chart.source}; {template.source}" if template.source else chart.source,
        )
        for template in chart.workloads
        if _holds(merged, template.when)
    ]


def _stale(owner: str, chart: Chart, version: str) -> AddonTableError:
    return AddonTableError(
        f"{owner}: {chart.name} {version} is installed but tests/cluster/addon_pods.py was read at {chart.version} "
        f"({chart.source}): read the new version's templates and update its table"
    )


def _release(version: str) -> str:
    """The upstream release in an EKS add-on version (`v1.20.4-eksbuild.1`: 1.20.4)."""
    found = re.match(r"v?(\d+\.\d+\.\d+)", version)
    return found.group(1) if found else version


def _helm_release(registration: Registration, owner: str) -> tuple[Chart, Values]:
    name = str(registration.inputs.get("chart", "")).rsplit("/", 1)[-1]  # an OCI reference ends in the chart's name
    chart = CHARTS.get(name)
    if chart is None:
        raise AddonTableError(f"{owner}: no table for chart {name}: read its templates and add one")
    version = str(registration.inputs.get("version"))
    if version != chart.version:
        raise _stale(owner, chart, version)
    return chart, registration.inputs.get("values") or {}


def _eks_addon(registration: Registration, owner: str) -> tuple[Chart, Values]:
    name = str(registration.inputs.get("addonName"))
    chart = ADDONS.get(name)
    if chart is None:
        raise AddonTableError(f"{owner}: no table for the EKS add-on {name}: read the chart it is built from")
    pinned = registration.inputs.get("addonVersion")
    if pinned and _release(pinned) != _release(chart.version):
        raise _stale(owner, chart, pinned)
    configuration = registration.inputs.get("configurationValues")
    return chart, json.loads(configuration) if configuration else {}


INSTALLERS = {HELM_RELEASE: _helm_release, EKS_ADDON: _eks_addon}


def stood_in(registration: Registration) -> bool:
    """A chart or EKS add-on the local cluster stands in: not one Helm renders from a Go module (tests.cluster.charts)
    nor a manifest (tests.cluster.manifests renders every kustomization and yaml file)."""
    return registration.type in INSTALLERS and charts.chart_name(registration) not in charts.CHARTS


def addon_workloads(deployment: Deployment) -> list[Workload]:
    """Every pod of the add-ons the local cluster stands in, with the values the stack passes applied."""
    workloads = []
    for registration in sorted(deployment.registrations, key=lambda r: r.name):
        installer = INSTALLERS.get(registration.type)
        if installer is not None and stood_in(registration):
            owner = located(registration)
            workloads += render(*installer(registration, owner), owner)
    return workloads
