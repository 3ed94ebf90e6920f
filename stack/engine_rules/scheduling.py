"""What Kubernetes, the charts and the Cluster Autoscaler schedule: device plugins, CRDs, pods, volumes."""

from collections.abc import Iterator
from typing import Any

from eks_ddp.infra.facts import versions
from eks_ddp.stack.engine_rules.base import (
    K8S_PREFIX,
    Deployment,
    Finding,
    admits,
    containers,
    located,
    node_sources,
    pod_specs,
    quantity,
    tolerated,
)
from eks_ddp.stack.mocking import Registration

CORE_RESOURCES = {"cpu", "memory", "ephemeral-storage"}


def efa_device_plugin_schedules(deployment: Deployment) -> Iterator[Finding]:
    """The EFA device plugin runs only where its chart's node affinity, selector and tolerations allow.

    Source: aws/eks-charts stable/aws-efa-k8s-device-plugin v0.5.30, templates/daemonset.yaml:
    `supportedInstanceLabels` becomes a required node affinity (`node.kubernetes.io/instance-type`
    In the list); without the plugin no pod ever gets `vpc.amazonaws.com/efa`.
    """
    releases = [
        r
        for r in deployment.of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs.get("chart") == "aws-efa-k8s-device-plugin"
    ]
    for nodes in node_sources(deployment):
        if not nodes.efa_devices:
            continue
        where = located(nodes.registration)
        if not releases:
            yield Finding(
                "efa-device-plugin", where, "instanceTypes", "no EFA device plugin: no pod gets vpc.amazonaws.com/efa"
            )
        for release in releases:
            values = release.inputs.get("values", {})
            supported = (values.get("supportedInstanceLabels") or {}).get("values")
            if supported is None:
                yield Finding(
                    "efa-device-plugin",
                    located(release),
                    "values.supportedInstanceLabels",
                    f"the chart's own list decides whether {nodes.instance_type} gets "
                    "the plugin (v0.5.8's lacks c7gn.metal and c8g); set it from the catalogue",
                )
            elif nodes.instance_type not in supported:
                yield Finding(
                    "efa-device-plugin",
                    where,
                    "instanceTypes",
                    f"{nodes.instance_type} is not in the plugin's supportedInstanceLabels",
                )
            selector = values.get("nodeSelector") or {}
            if any(nodes.labels.get(key) != value for key, value in selector.items()):
                yield Finding(
                    "efa-device-plugin", where, "labels", f"the plugin's nodeSelector {selector} does not match"
                )
            if not tolerated(nodes.taints, values.get("tolerations") or []):
                yield Finding("efa-device-plugin", where, "taints", "the plugin does not tolerate the group's taints")


# NVIDIA/k8s-device-plugin v0.20.0 deployments/helm/nvidia-device-plugin/values.yaml: the default required
# node affinity (any one term), kept unless a release's values replace `affinity`.
NVIDIA_PLUGIN_AFFINITY = (
    {"feature.node.kubernetes.io/pci-10de.present": "true"},
    {"feature.node.kubernetes.io/cpu-model.vendor_id": "NVIDIA"},
    {"nvidia.com/gpu.present": "true"},
)


def nvidia_device_plugin_schedules(deployment: Deployment) -> Iterator[Finding]:
    """Without the NVIDIA device plugin on a GPU node no pod gets `nvidia.com/gpu`: GPU pods stay Pending
    while the autoscaler keeps adding nodes for them.

    Source: the chart's templates/daemonset-device-plugin.yml (v0.20.0) puts `nodeSelector`, `affinity` and
    `tolerations` from its values on the DaemonSet; the EKS AL2023 NVIDIA AMIs ship no plugin of their own.
    """
    charts = deployment.of_type("kubernetes:helm.sh/v3:Release")
    releases = [r for r in charts if r.inputs.get("chart") == "nvidia-device-plugin"]
    for nodes in node_sources(deployment):
        if not nodes.nvidia:
            continue
        labels, where = nodes.labels, located(nodes.registration)
        if not releases:
            yield Finding(
                "nvidia-device-plugin", where, "amiType", "no NVIDIA device plugin: no pod gets nvidia.com/gpu"
            )
        for release in releases:
            values = release.inputs.get("values", {})
            selector = values.get("nodeSelector") or {}
            terms = [
                {e["key"]: e["values"][0] for e in term.get("matchExpressions", [])}
                for term in (values.get("affinity") or {})
                .get("nodeAffinity", {})
                .get("requiredDuringSchedulingIgnoredDuringExecution", {})
                .get("nodeSelectorTerms", [])
            ] or NVIDIA_PLUGIN_AFFINITY
            if any(labels.get(key) != value for key, value in selector.items()) or not any(
                all(labels.get(key) == value for key, value in term.items()) for term in terms
            ):
                yield Finding(
                    "nvidia-device-plugin",
                    where,
                    "labels",
                    f"the plugin's nodeSelector {selector} or node affinity does not match the group's labels",
                )
            if not tolerated(nodes.taints, values.get("tolerations") or []):
                yield Finding(
                    "nvidia-device-plugin", where, "taints", "the plugin does not tolerate the group's taints"
                )


def gpu_exporter_schedules(deployment: Deployment) -> Iterator[Finding]:
    """The DCGM exporter reports only the GPU nodes its DaemonSet reaches: its chart's `nodeSelector` and
    `tolerations` must admit every GPU group (NVIDIA/dcgm-exporter 4.8.2, deployment/templates/daemonset.yaml;
    its default tolerations admit only control-plane nodes)."""
    charts = deployment.of_type("kubernetes:helm.sh/v3:Release")
    for release in (r for r in charts if r.inputs.get("chart") == "dcgm-exporter"):
        values = release.inputs.get("values", {})
        selector, tolerations = values.get("nodeSelector") or {}, values.get("tolerations") or []
        for nodes in node_sources(deployment):
            if nodes.nvidia and (
                any(nodes.labels.get(k) != v for k, v in selector.items()) or not tolerated(nodes.taints, tolerations)
            ):
                yield Finding(
                    "gpu-exporter",
                    located(nodes.registration),
                    "labels/taints",
                    f"{located(release)} does not reach its nodes: no GPU metrics from them",
                )


# The CRDs each pinned operator install applies (read from the releases): kubeflow/trainer v1.9.4
# manifests/base/crds/ and kubeflow/mpi-operator v0.8.0 deploy/v2beta1/mpi-operator.yaml.


TRAINING_OPERATOR_CRDS = {
    f"{kind}.kubeflow.org" for kind in ("pytorchjobs", "mpijobs", "tfjobs", "xgboostjobs", "paddlejobs", "jaxjobs")
}
INSTALLED_CRDS = {
    versions.TRAINING_OPERATOR_OVERLAY.format(version=versions.TRAINING_OPERATOR_VERSION): TRAINING_OPERATOR_CRDS,
    "infra/addons/manifests/training-operator-without-mpijob": TRAINING_OPERATOR_CRDS - {"mpijobs.kubeflow.org"},
    versions.MPI_OPERATOR_MANIFEST.format(version=versions.MPI_OPERATOR_VERSION): {"mpijobs.kubeflow.org"},
}


def crds_have_one_owner(deployment: Deployment) -> Iterator[Finding]:
    """Two installs that apply the same CRD replace each other's versions, and two controllers reconcile the
    same objects: the training operator v1 and the MPI operator v2 both ship mpijobs.kubeflow.org."""
    owners: dict[str, list[Registration]] = {}
    for registration in deployment.registrations:
        source = registration.inputs.get("directory") or registration.inputs.get("file")
        for crd in INSTALLED_CRDS.get(str(source), set()) if registration.type.startswith(K8S_PREFIX) else set():
            owners.setdefault(crd, []).append(registration)
    for crd, installs in sorted(owners.items()):
        for install in installs[1:]:
            yield Finding(
                "crd-owner",
                located(install),
                "directory" if "directory" in install.inputs else "file",
                f"{crd} is also applied by {located(installs[0])}; install one of them without it",
            )


def pod_requests(pod: dict[str, Any]) -> dict[str, float]:
    """What one pod asks of its node, per resource (CPU in millicores, memory in MiB): the larger of its biggest
    init container's request and its containers' sum, since init containers run one at a time before them
    (kubernetes v1.35 staging/src/k8s.io/component-helpers/resource/helpers.go, PodRequests)."""

    def amounts(container: dict[str, Any]) -> dict[str, float]:
        requests = (container.get("resources") or {}).get("requests", {})
        scale = {"cpu": 1000, "memory": 2**-20}
        return {name: quantity(value) * scale.get(name, 1) for name, value in requests.items()}

    running: dict[str, float] = {}
    for container in pod.get("containers", []):
        for name, value in amounts(container).items():
            running[name] = running.get(name, 0) + value
    for init in pod.get("initContainers", []):
        for name, value in amounts(init).items():
            running[name] = max(running.get(name, 0), value)
    return running


def _extended_requests(pod: dict[str, Any]) -> dict[str, float]:
    """What one pod asks of its node beyond CPU and memory."""
    return {name: amount for name, amount in pod_requests(pod).items() if name not in CORE_RESOURCES}


def pods_fit_node_templates(deployment: Deployment) -> Iterator[Finding]:
    """A pod that requests more of a resource than any node the autoscaler could add offers stays Pending:
    nothing scales up for it.

    Sources: kubernetes/autoscaler cluster-autoscaler-1.35.2, cloudprovider/aws/aws_manager.go
    (buildNodeFromTemplate): a managed group at zero offers only the resources its ASG's tags announce;
    aws/karpenter-provider-aws v1.14.1, pkg/providers/instancetype/types.go (computeCapacity, efas): a NodePool's
    node offers the node class's `efa-only` interfaces and the type's GPUs. Either way the scheduler places a
    pod only where its nodeSelector matches and its tolerations cover the taints.
    """
    sources = node_sources(deployment)
    for registration in deployment.kubernetes_objects():
        for pod in pod_specs(registration.inputs):
            if not pod.get("containers"):
                continue
            fitting = [nodes for nodes in sources if admits(nodes, pod)]
            if not fitting:
                selector = pod.get("nodeSelector") or {}
                yield Finding("schedulable", located(registration), "nodeSelector", f"no node group matches {selector}")
                continue
            for resource, count in sorted(_extended_requests(pod).items()):
                if not any(nodes.offers.get(resource, 0) >= count for nodes in fitting):
                    offered = ", ".join(f"{located(n.registration)}: {n.offers.get(resource, 0)}" for n in fitting)
                    yield Finding(
                        "schedulable",
                        located(registration),
                        f"resources.requests.{resource}",
                        f"{count:g} requested, and no matching node group's new nodes offer that many ({offered}): "
                        "the pod stays Pending and nothing scales up",
                    )


# Provisioners whose CSIDriver never applies fsGroup to a ReadWriteMany volume, with the source.


FS_GROUP_NOT_APPLIED = {
    # kubernetes-sigs/aws-fsx-csi-driver chart 1.11.0 values.yaml: fsGroupPolicy ReadWriteOnceWithFSType.
    "fsx.csi.aws.com",
}


def _claims(deployment: Deployment) -> dict[str, str]:
    """Claim name -> the CSI driver behind it: its StorageClass's provisioner, or its static volume's driver."""
    classes = {
        str(r.inputs.get("metadata", {}).get("name")): str(r.inputs.get("provisioner", ""))
        for r in deployment.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    }
    volumes = {
        str(r.inputs.get("metadata", {}).get("name")): (r.inputs.get("spec", {}).get("csi") or {}).get("driver", "")
        for r in deployment.of_type("kubernetes:core/v1:PersistentVolume")
    }
    return {
        str(r.inputs["metadata"]["name"]): volumes.get(str(r.inputs.get("spec", {}).get("volumeName")))
        or classes.get(str(r.inputs.get("spec", {}).get("storageClassName")), "")
        for r in deployment.of_type("kubernetes:core/v1:PersistentVolumeClaim")
    }


def shared_volume_ownership(deployment: Deployment) -> Iterator[Finding]:
    """A non-root pod on a new FSx for Lustre volume cannot create its directories unless a root step makes them.

    Sources: a new FSx for Lustre file system's root directory belongs to root (FSx for Lustre
    user guide, "File system access"); Kubernetes applies fsGroup only where the CSIDriver's
    fsGroupPolicy allows (kubernetes-csi docs, "Support for fsGroup"), and the FSx chart's is
    ReadWriteOnceWithFSType, never a ReadWriteMany Lustre claim.
    """
    claims = _claims(deployment)
    for registration in deployment.kubernetes_objects():
        for pod in pod_specs(registration.inputs):
            volumes = {
                v["name"]
                for v in pod.get("volumes", [])
                if claims.get(str((v.get("persistentVolumeClaim") or {}).get("claimName")), "") in FS_GROUP_NOT_APPLIED
            }
            if not volumes or (pod.get("securityContext") or {}).get("runAsUser") == 0:
                continue
            first = next(
                (c for c in containers(pod) if volumes & {m["name"] for m in c.get("volumeMounts", [])}),
                {},
            )
            if (first.get("securityContext") or {}).get("runAsUser") != 0:
                yield Finding(
                    "volume-ownership",
                    located(registration),
                    "initContainers",
                    f"{first.get('name')} is the first to use the FSx volume and does not run as root: the "
                    "volume's root is root's and fsGroup is never applied to it, so mkdir fails",
                )
