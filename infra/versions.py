"""Every pinned version in one place, each with the reason for the pin.

Bump a pin only after reading the upstream changelog; a pin moves the whole
fleet on the next `pulumi up`.
"""

# EKS standard support, and >= 1.33 so the cluster security group carries the
# built-in "all to self" egress rule that EFA traffic relies on.
DEFAULT_KUBERNETES_VERSION = "1.33"
SUPPORTED_KUBERNETES_VERSIONS = ("1.33", "1.34")

# Managed add-ons. vpc-cni must be >= 1.18.4 for `efa-only` interfaces. `None`
# lets EKS pick the default version for the cluster's Kubernetes version.
ADDON_VERSIONS: dict[str, str | None] = {
    "vpc-cni": None,
    "coredns": None,
    "kube-proxy": None,
    "eks-pod-identity-agent": None,
}
MINIMUM_VPC_CNI = (1, 18, 4)

EKS_CHARTS = "https://aws.github.io/eks-charts"

# The EFA device plugin advertises vpc.amazonaws.com/efa; v0.5.x is the line the
# EKS blueprints use for EFA on EKS.
EFA_DEVICE_PLUGIN_CHART = ("aws-efa-k8s-device-plugin", "v0.5.8", EKS_CHARTS)

# Chart 9.x deploys Cluster Autoscaler 1.3x; the image itself is chosen from
# CLUSTER_AUTOSCALER_IMAGES so its minor version matches the cluster's.
CLUSTER_AUTOSCALER_CHART = ("cluster-autoscaler", "9.47.0", "https://kubernetes.github.io/autoscaler")
CLUSTER_AUTOSCALER_IMAGES = {"1.33": "v1.33.0", "1.34": "v1.34.0"}

METRICS_SERVER_CHART = ("metrics-server", "3.12.2", "https://kubernetes-sigs.github.io/metrics-server/")

FSX_CSI_CHART = ("aws-fsx-csi-driver", "1.11.0", "https://kubernetes-sigs.github.io/aws-fsx-csi-driver")
EFS_CSI_CHART = ("aws-efs-csi-driver", "3.1.9", "https://kubernetes-sigs.github.io/aws-efs-csi-driver")

# Kubeflow training operator v1 (PyTorchJob kubeflow.org/v1). v1.9.x is the last
# v1 line (its successor, Trainer v2, has no elastic PyTorch); v1.9.4 (2026-08)
# is its newest release. The repository moved to kubeflow/trainer.
TRAINING_OPERATOR_VERSION = "v1.9.4"
TRAINING_OPERATOR_OVERLAY = "github.com/kubeflow/trainer.git/manifests/overlays/standalone?ref={version}"
