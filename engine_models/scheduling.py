"""What Kubernetes, the charts and the Cluster Autoscaler schedule: CRDs, pods on Karpenter's node templates, volumes.

Whether the device plugins and the DCGM exporter reach every node of their groups the scheduler decides, on the
engines themselves (tests/cluster/test_stacks_on_engines.py)."""

from collections.abc import Iterator
from typing import Any

from eks_ddp.infra.facts import versions
from eks_ddp.engine_models.base import (
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
from eks_ddp.tools.mocking import Registration

CORE_RESOURCES = {"cpu", "memory", "ephemeral-storage"}


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
