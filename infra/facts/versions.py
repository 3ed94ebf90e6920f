"""Every pinned version in one place, each with the reason for the pin.

Bump a pin only after reading the upstream changelog; a pin moves the whole
fleet on the next `pulumi up`.
"""

from datetime import date

# EKS standard support: 14 months per minor, then extended support at $0.60 instead
# of $0.10 per cluster hour (EKS user guide, "Understand the Kubernetes version
# lifecycle on EKS"; dates as published there, read 2026-11). 1.33 left standard
# support on 2026-07-29. The default is 1.35, not 1.34: 1.34 leaves standard
# support on 2026-12-02, days after this pin was set, and the deploy rehearsal
# refuses a version past its date. Every version here is >= 1.33, so the cluster
# security group carries the built-in "all to self" egress rule EFA relies on.
STANDARD_SUPPORT_ENDS = {"1.34": date(2026, 12, 2), "1.35": date(2027, 3, 27)}
SUPPORTED_KUBERNETES_VERSIONS = tuple(STANDARD_SUPPORT_ENDS)
DEFAULT_KUBERNETES_VERSION = "1.35"

# Managed add-ons. vpc-cni must be >= 1.18.4 for `efa-only` interfaces. `None`
# lets EKS pick the default version for the cluster's Kubernetes version.
ADDON_VERSIONS: dict[str, str | None] = {
    "vpc-cni": None,
    "coredns": None,
    "kube-proxy": None,
    "eks-pod-identity-agent": None,
    # eks-ddp:nodeHealth: node conditions for GPU, EFA, kernel and runtime faults, which node auto-repair acts on.
    "eks-node-monitoring-agent": None,
    # eks-ddp:monitoring cloudwatch: Container Insights with its GPU and EFA metrics.
    "amazon-cloudwatch-observability": None,
}
MINIMUM_VPC_CNI = (1, 18, 4)

# The EKS AL2023 standard AMIs (x86 and ARM) carry the EFA kernel module from this
# release on; the NVIDIA and Neuron AMIs always had it. An older `releaseVersion`
# pin on an EFA group boots nodes whose EFA interfaces never work.
EFA_STANDARD_AMI_FLOOR = "20260505"

EKS_CHARTS = "https://aws.github.io/eks-charts"

# The EFA device plugin advertises vpc.amazonaws.com/efa. v0.5.30 (app v0.5.20,
# 2026-08) is the current chart in aws/eks-charts; its values set the instance
# types the plugin may run on, which the component overrides with the catalogue.
EFA_DEVICE_PLUGIN_CHART = ("aws-efa-k8s-device-plugin", "v0.5.30", EKS_CHARTS)

# The NVIDIA device plugin advertises nvidia.com/gpu; the EKS AL2023 NVIDIA AMIs need it. v0.20.0
# (2026-08-19) is the newest release of NVIDIA/k8s-device-plugin; its node-feature-discovery
# dependency stays off (our GPU groups carry nvidia.com/gpu.present=true themselves).
NVIDIA_DEVICE_PLUGIN_CHART = ("nvidia-device-plugin", "0.20.0", "https://nvidia.github.io/k8s-device-plugin")
# aws-neuron/neuron-helm-charts 1.9.0 (Chart.yaml at b77a6f9): the Neuron device plugin 2.31.0.0 (and, off here, its
# scheduler extension, node problem detector and DRA driver). AWS's install: aws-neuron/aws-neuron-sdk v2.32.0
# deploy/includes/k8s-neuron-device-plugin.rst (`helm upgrade --install neuron-helm-chart oci://public.ecr.aws/neuron/
# neuron-helm-chart --set npd.enabled=false`). Chart 1.0.0 lists no trn2 types: on those its plugin never runs.
NEURON_DEVICE_PLUGIN_CHART = ("neuron-helm-chart", "1.9.0", "oci://public.ecr.aws/neuron")

# kubernetes/autoscaler chart 9.59.0 (tag cluster-autoscaler-chart-9.59.0, 2026-07-21, the newest; since 9.52.0 at
# cluster-autoscaler/charts/cluster-autoscaler): its ClusterRole (templates/clusterrole.yaml) lets both images below
# list and watch all they watch, resource.k8s.io's ResourceClaims, ResourceSlices and DeviceClasses included (granted
# since 9.54.0). Image 1.35 always watches those and scales nothing until it has listed them: under 9.47.0's
# ClusterRole it never scaled (tests/infra/test_cluster_autoscaler_rbac.py: what each image watches against what the
# chart grants). The values keys we set are unchanged since 9.47.0. The image is chosen from CLUSTER_AUTOSCALER_IMAGES
# so its minor version matches the cluster's, each at its newest patch (kubernetes/autoscaler tags
# cluster-autoscaler-1.34.5 and cluster-autoscaler-1.35.2, both 2026-07-22).
CLUSTER_AUTOSCALER_CHART = ("cluster-autoscaler", "9.59.0", "https://kubernetes.github.io/autoscaler")
CLUSTER_AUTOSCALER_IMAGES = {"1.34": "v1.34.5", "1.35": "v1.35.2"}

# Karpenter (karpenter.sh/v1 NodePool, karpenter.k8s.aws/v1 EC2NodeClass): 1.14.1 (2026-08-21) is the newest release
# of aws/karpenter-provider-aws, the line AWS's ai-on-eks blueprints run; since 1.11 an EC2NodeClass attaches EFA
# per network card (`networkInterfaces`) and selects a placement group. Its chart installs the CRDs, but Helm applies
# a chart's crds/ on the first install only: before raising this pin, apply the new release's CRDs (Karpenter's
# upgrade guide: the karpenter-crd chart), or the old CRDs reject the new fields.
KARPENTER_CHART = ("karpenter", "1.14.1", "oci://public.ecr.aws/karpenter")

# Monitoring (eks-ddp:monitoring prometheus). kube-prometheus-stack 88.5.3 (2026-08-22) is the newest chart of
# prometheus-community/helm-charts: prometheus-operator v0.93.1 (its PodMonitor/ServiceMonitor CRDs are v0.93.0's
# in upstream/schemas, a patch apart), Grafana, kube-state-metrics 8.4.0, prometheus-node-exporter 4.56.1.
PROMETHEUS_COMMUNITY = "https://prometheus-community.github.io/helm-charts"
KUBE_PROMETHEUS_STACK_CHART = ("kube-prometheus-stack", "88.5.3", PROMETHEUS_COMMUNITY)
# The same node-exporter chart again, for AWS's EFA node exporter image on EFA nodes (infra/addons/prometheus_monitoring.py).
NODE_EXPORTER_CHART = ("prometheus-node-exporter", "4.56.1", PROMETHEUS_COMMUNITY)
# NVIDIA/dcgm-exporter chart 4.8.2 (2026-05-12, the newest release): GPU utilisation, memory and power per GPU.
DCGM_EXPORTER_CHART = ("dcgm-exporter", "4.8.2", "https://nvidia.github.io/dcgm-exporter/helm-charts")

METRICS_SERVER_CHART = ("metrics-server", "3.12.2", "https://kubernetes-sigs.github.io/metrics-server/")

FSX_CSI_CHART = ("aws-fsx-csi-driver", "1.11.0", "https://kubernetes-sigs.github.io/aws-fsx-csi-driver")
EFS_CSI_CHART = ("aws-efs-csi-driver", "3.1.9", "https://kubernetes-sigs.github.io/aws-efs-csi-driver")

# Kubeflow training operator v1 (PyTorchJob kubeflow.org/v1). v1.9.x is the last
# v1 line (its successor, Trainer v2, has no elastic PyTorch); v1.9.4 (2026-08)
# is its newest release. The repository moved to kubeflow/trainer.
TRAINING_OPERATOR_VERSION = "v1.9.4"
TRAINING_OPERATOR_OVERLAY = "github.com/kubeflow/trainer.git/manifests/overlays/standalone?ref={version}"

# Kubeflow Trainer v2 (TrainJob trainer.kubeflow.org/v1alpha1), the line after the training operator v1: chart
# 2.3.0 (2026-08-05) is its newest release; it installs JobSet 0.12.0 as a dependency (Chart.yaml).
KUBEFLOW_TRAINER_CHART = ("kubeflow-trainer", "2.3.0", "oci://ghcr.io/kubeflow/charts")

# Kueue (eks-ddp:queueing kueue): 0.17.0 (2026-03-31), the one version the Go module proxy here lists
# (sigs.k8s.io/kueue v0.17.0, tests/cluster/engines/kueue builds its manager). It supports Kubeflow Trainer v2.2's
# TrainJob (CHANGELOG-0.17: "Add support to Kubeflow Trainer v2.2", compiled against trainer v2.2.0; the stack runs
# v2.3.0, whose TrainJob keeps the v2.2 fields Kueue writes: spec.suspend, spec.runtimePatches), the training
# operator's PyTorchJob (compiled against v1.9.3; we run v1.9.4) and the MPI operator v0.8.0's MPIJob. Its chart is
# published from the tag to registry.k8s.io (hack/helm-chart-package.sh), its CRDs in templates/: Helm upgrades them.
KUEUE_CHART = ("kueue", "0.17.0", "oci://registry.k8s.io/kueue/charts")
# The ProvisioningRequest CRD Kueue's admission check creates requests of and the Cluster Autoscaler answers. The
# autoscaler's chart does not install it (9.59.0 has no crds/); the file is the autoscaler's own at the image's tag
# (kubernetes/autoscaler cluster-autoscaler-1.35.2 cluster-autoscaler/apis/config/crd/, autoscaling.x-k8s.io v1
# served and stored), applied before Kueue starts, which looks for the API once (cmd/kueue/main.go).
PROVISIONING_REQUEST_CRD = (
    "https://raw.githubusercontent.com/kubernetes/autoscaler/cluster-autoscaler-{version}/cluster-autoscaler/apis/"
    "config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml"
)

# The MPI operator v2 (MPIJob kubeflow.org/v2beta1), which the GPU workshop installs for nccl-tests:
# v0.8.0 (2026-02-18) is its newest release; its manifest carries the CRD, RBAC and the controller.
MPI_OPERATOR_VERSION = "v0.8.0"
MPI_OPERATOR_MANIFEST = (
    "https://raw.githubusercontent.com/kubeflow/mpi-operator/{version}/deploy/v2beta1/mpi-operator.yaml"
)
