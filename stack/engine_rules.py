"""What the engines do with what a stack registers, as rules run by the deploy rehearsal.

Mocks accept everything; these rules are what pulumi-kubernetes, EKS, EC2, a Helm chart,
the Cluster Autoscaler and Kubernetes would do with the same inputs. Each rule reads the
registrations of one stack run under mocks, names its source (repository, file, version
or document), and reports the resource and the key it objects to.
"""

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from infra import catalogue, versions
from infra.efa_node_group import KUBERNETES_EFFECT, TaintEffect
from infra.mocking import Registration

K8S_PREFIX = "kubernetes:"
SKIP_AWAIT, TIMEOUT_SECONDS = "pulumi.com/skipAwait", "pulumi.com/timeoutSeconds"
NODE_TEMPLATE = "k8s.io/cluster-autoscaler/node-template/"
CORE_RESOURCES = {"cpu", "memory", "ephemeral-storage"}
ARCHITECTURE = {"ARM_64": "arm64", "x86_64": "amd64"}
RUN_TO_COMPLETION = {"PyTorchJob", "TrainJob", "MPIJob"}


@dataclass(frozen=True)
class Finding:
    rule: str
    resource: str
    key: str
    problem: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.resource} {self.key}: {self.problem}"


@dataclass(frozen=True)
class Deployment:
    """One stack's registrations under mocks, and the facts the engines add at deploy time."""

    registrations: list[Registration]
    region: str
    deployer_arn: str
    today: date
    network_cards: Mapping[str, int] = field(default_factory=dict)
    """EC2's network cards per instance type (the catalogue's where EC2's data is not at hand)."""

    def cards(self, instance_type: str) -> int | None:
        facts = catalogue.lookup(instance_type)
        return self.network_cards.get(instance_type, facts.network_cards if facts else None)

    def of_type(self, type_: str) -> list[Registration]:
        return sorted((r for r in self.registrations if r.type == type_), key=lambda r: r.name)

    def kubernetes_objects(self) -> list[Registration]:
        return [r for r in self.registrations if r.type.startswith(K8S_PREFIX) and "kind" in r.inputs]


Rule = Callable[[Deployment], Iterator[Finding]]


def _where(registration: Registration) -> str:
    return f"{registration.type.split(':')[-1]} {registration.name}"


def _annotations(registration: Registration) -> dict[str, str]:
    return registration.inputs.get("metadata", {}).get("annotations") or {}


def _seconds(text: str) -> float:
    """A Pulumi custom timeout ("10m", "1h30m", "90s") in seconds."""
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(float(amount) * units[unit] for amount, unit in re.findall(r"([\d.]+)([hms])", text))


def _await_limit(registration: Registration, default: float) -> float:
    """How long pulumi-kubernetes waits: customTimeouts, then `pulumi.com/timeoutSeconds`, then its default."""
    if "create" in registration.custom_timeouts:
        return _seconds(registration.custom_timeouts["create"])
    annotation = _annotations(registration).get(TIMEOUT_SECONDS, "")
    return float(annotation) if annotation.isdigit() else default


# Worst case of each provisioner to bind a new claim, with the reason.
PROVISIONING_SECONDS = {
    # A new FSx for Lustre file system takes 5-10 minutes and more at larger sizes; the
    # FSx CSI driver itself polls for up to 10 minutes (pkg/cloud/cloud.go, v1.x).
    "fsx.csi.aws.com": 15 * 60,
    # An EFS access point on an existing file system: seconds.
    "efs.csi.aws.com": 60,
}


def _awaits_endpoints(spec: dict[str, Any]) -> bool:
    """service.go: a Service is awaited until it has a ready endpoint, unless headless, ExternalName or selectorless."""
    return spec.get("clusterIP") != "None" and spec.get("type") != "ExternalName" and bool(spec.get("selector"))


def kubernetes_awaits(deployment: Deployment) -> Iterator[Finding]:
    """pulumi-kubernetes waits on some kinds before `pulumi up` moves on; the wait must cover the worst case.

    Source: pulumi/pulumi-kubernetes v4.32.0, provider/pkg/await/awaiters.go, await.go and
    metadata/overrides.go. A batch/v1 Job is awaited until Complete (10 minutes unless
    customTimeouts or `pulumi.com/timeoutSeconds`; its worst case is its activeDeadlineSeconds,
    unbounded without one). A PersistentVolumeClaim is awaited until Bound for a fixed 5
    minutes, or only until Pending when its StorageClass binds WaitForFirstConsumer. Custom
    resources are awaited for a Ready condition under PULUMI_K8S_AWAIT_ALL=true; a PyTorchJob
    has none. A Service (await/service.go) waits for a ready endpoint unless it is headless.
    `pulumi.com/skipAwait: "true"` opts any of them out. Helm releases
    (provider/pkg/provider/helm_release.go) wait 300 s unless `timeout` or `skipAwait` is set.
    """
    classes = {
        r.inputs.get("metadata", {}).get("name"): r.inputs
        for r in deployment.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    }
    for registration in deployment.kubernetes_objects():
        if _annotations(registration).get(SKIP_AWAIT) == "true":
            continue
        kind, spec = registration.inputs["kind"], registration.inputs.get("spec", {})
        if kind == "Job":
            deadline = spec.get("activeDeadlineSeconds")
            limit = _await_limit(registration, 600)
            if deadline is None or deadline > limit:
                worst = "no activeDeadlineSeconds: unbounded" if deadline is None else f"up to {deadline:g} s"
                yield Finding(
                    "awaits",
                    _where(registration),
                    "metadata.annotations",
                    f"pulumi up waits for the Job to complete for {limit:g} s, but it runs {worst}; "
                    f'set {SKIP_AWAIT}: "true" and watch it instead',
                )
        elif kind == "PersistentVolumeClaim":
            storage_class = classes.get(spec.get("storageClassName"), {})
            if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer":
                continue
            worst = PROVISIONING_SECONDS.get(storage_class.get("provisioner", ""), 0)
            if worst > 300:
                yield Finding(
                    "awaits",
                    _where(registration),
                    "spec.storageClassName",
                    f"an Immediate claim is awaited until Bound for a fixed 300 s, but "
                    f"{storage_class.get('provisioner')} takes up to {worst} s; bind WaitForFirstConsumer",
                )
        elif kind in RUN_TO_COMPLETION:
            yield Finding(
                "awaits",
                _where(registration),
                "metadata.annotations",
                f"under PULUMI_K8S_AWAIT_ALL=true pulumi up waits 10 minutes for a Ready condition a "
                f'{kind} never has; set {SKIP_AWAIT}: "true"',
            )
        elif kind == "Service" and _awaits_endpoints(spec):
            yield Finding(
                "awaits",
                _where(registration),
                "spec.clusterIP",
                "pulumi up waits up to 10 minutes for a ready endpoint, and the pods behind it belong to a job "
                "on nodes that may scale from zero; make it headless (clusterIP: None) or skip the await",
            )
    for release in deployment.of_type("kubernetes:helm.sh/v3:Release"):
        inputs = release.inputs
        if not inputs.get("skipAwait") and "timeout" not in inputs:
            yield Finding(
                "awaits",
                _where(release),
                "timeout",
                "Helm waits for every Deployment and DaemonSet within an implicit 300 s; set a timeout "
                "that covers nodes joining during the install, with its reason, or skipAwait",
            )


# Kinds whose spec the API server refuses to change, by the CRD's CEL rules (`self == oldSelf`):
# kubeflow/trainer v2.3.0 manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml makes a TrainJob's
# `spec.trainer` and `spec.runtimeRef` immutable.
IMMUTABLE_SPECS = {"TrainJob"}


def immutable_specs_replaced(deployment: Deployment) -> Iterator[Finding]:
    """An object with an immutable spec must be replaced when it changes, or the next `pulumi up` fails.

    pulumi-kubernetes updates a custom resource in place unless `replaceOnChanges` names the
    changed path; keeping its name, the old object must go first (`deleteBeforeReplace`).
    """
    for registration in deployment.kubernetes_objects():
        if registration.inputs["kind"] not in IMMUTABLE_SPECS:
            continue
        if "spec" not in registration.replace_on_changes or not registration.delete_before_replace:
            yield Finding(
                "immutable",
                _where(registration),
                "replaceOnChanges",
                f"a {registration.inputs['kind']}'s spec is immutable: an update fails; replace it "
                "(replaceOnChanges [spec], deleteBeforeReplace)",
            )


def no_ttl_on_owned_objects(deployment: Deployment) -> Iterator[Finding]:
    """Kubernetes must not delete what Pulumi owns: `pulumi up --refresh` would recreate it and re-run it.

    Sources: kubernetes/kubernetes pkg/controller/ttlafterfinished (Jobs, ttlSecondsAfterFinished);
    kubeflow/trainer release-1.9 pkg/controller.v1/common/job.go (runPolicy.ttlSecondsAfterFinished
    deletes the finished PyTorchJob).
    """
    for registration in deployment.kubernetes_objects():
        spec = registration.inputs.get("spec", {})
        if "ttlSecondsAfterFinished" in spec:
            yield Finding(
                "ttl",
                _where(registration),
                "spec.ttlSecondsAfterFinished",
                "Kubernetes deletes the finished Job that Pulumi still tracks",
            )
        if "ttlSecondsAfterFinished" in spec.get("runPolicy", {}):
            yield Finding(
                "ttl",
                _where(registration),
                "spec.runPolicy.ttlSecondsAfterFinished",
                "the training operator deletes the finished job that Pulumi still tracks",
            )


def _launch_template(deployment: Deployment, node_group: Registration) -> Registration | None:
    reference = node_group.inputs.get("launchTemplate") or {}
    return next(
        (r for r in deployment.of_type("aws:ec2/launchTemplate:LaunchTemplate") if r.id == reference.get("id")), None
    )


def _instance_type(node_group: Registration, template: Registration | None) -> str | None:
    types = node_group.inputs.get("instanceTypes") or []
    return types[0] if types else (template.inputs.get("instanceType") if template else None)


def managed_node_group_launch_templates(deployment: Deployment) -> Iterator[Finding]:
    """What EKS refuses in a managed node group's launch template.

    Sources: EKS user guide "Customize managed nodes with launch templates" (prohibited
    settings: IamInstanceProfile, SubnetId, RequestSpotInstances, hibernation, shutdown
    behaviour terminate; the instance type in the template or on the group, not both) and
    "Create a managed node group with Capacity Blocks" (market type capacity-block, the
    reservation and the instance type in the template, none on the group).
    """
    for node_group in deployment.of_type("aws:eks/nodeGroup:NodeGroup"):
        template = _launch_template(deployment, node_group)
        if template is None:
            continue
        where, inputs = _where(template), template.inputs
        for key in ("iamInstanceProfile", "hibernationOptions"):
            if inputs.get(key):
                yield Finding("launch-template", where, key, "managed node groups refuse it in the launch template")
        if inputs.get("instanceInitiatedShutdownBehavior") == "terminate":
            yield Finding(
                "launch-template", where, "instanceInitiatedShutdownBehavior", "managed node groups refuse terminate"
            )
        for index, interface in enumerate(inputs.get("networkInterfaces") or []):
            if interface.get("subnetId"):
                yield Finding(
                    "launch-template", where, f"networkInterfaces[{index}].subnetId", "the node group places nodes"
                )
        market = (inputs.get("instanceMarketOptions") or {}).get("marketType")
        if market == "spot":
            yield Finding("launch-template", where, "instanceMarketOptions", "use capacityType SPOT on the node group")
        if inputs.get("instanceType") and node_group.inputs.get("instanceTypes"):
            yield Finding(
                "launch-template", _where(node_group), "instanceTypes", "the launch template already names the type"
            )
        if node_group.inputs.get("capacityType") == "CAPACITY_BLOCK":
            if market != "capacity-block":
                yield Finding(
                    "launch-template",
                    where,
                    "instanceMarketOptions.marketType",
                    "a Capacity Block needs capacity-block",
                )
            if not inputs.get("instanceType"):
                yield Finding(
                    "launch-template", where, "instanceType", "a Capacity Block group takes its type from the template"
                )
            if node_group.inputs.get("instanceTypes"):
                yield Finding(
                    "launch-template", _where(node_group), "instanceTypes", "a Capacity Block group names no type"
                )


def _efa_interfaces(template: Registration | None) -> int:
    interfaces = (template.inputs.get("networkInterfaces") or []) if template else []
    return sum(1 for interface in interfaces if interface.get("interfaceType") in ("efa", "efa-only"))


def efa_interfaces_per_network_card(deployment: Deployment) -> Iterator[Finding]:
    """An EFA node takes one EFA interface per network card, or the missing cards carry no traffic.

    Source: EC2 user guide "Maximize network bandwidth on accelerated instances" (EFA on every
    card: `efa` at card 0 device 0, `efa-only` at device index 1 elsewhere); the cards per type
    from EC2's data (`Deployment.network_cards`), not from the catalogue the stack was built from.
    """
    for node_group in deployment.of_type("aws:eks/nodeGroup:NodeGroup"):
        template = _launch_template(deployment, node_group)
        count, instance_type = _efa_interfaces(template), _instance_type(node_group, template) or ""
        cards = deployment.cards(instance_type)
        if count and cards is not None and count != cards:
            yield Finding(
                "efa-interfaces",
                _where(node_group),
                "launchTemplate.networkInterfaces",
                f"{count} EFA interfaces on {instance_type}, which has {cards} network cards",
            )


def _node_labels(node_group: Registration, template: Registration | None) -> dict[str, str]:
    """The labels a managed node carries: the group's, its architecture and its instance type."""
    ami = node_group.inputs.get("amiType", "")
    arch = next((value for key, value in ARCHITECTURE.items() if key in ami), "")
    return {
        **(node_group.inputs.get("labels") or {}),
        "kubernetes.io/arch": arch,
        "node.kubernetes.io/instance-type": _instance_type(node_group, template) or "",
    }


def _tolerates(toleration: dict[str, Any], key: str, value: str, effect: str) -> bool:
    """kubernetes/api core/v1 toleration.go ToleratesTaint: an empty key with Exists matches every taint."""
    if toleration.get("effect") not in (None, "", effect):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration.get("key") == key
    return toleration.get("key") == key and str(toleration.get("value") or "") == value


def _tolerated(taints: list[dict[str, Any]], tolerations: list[dict[str, Any]]) -> bool:
    """Whether a pod may run beside the node group's taints (EKS API effects, such as NO_SCHEDULE)."""
    for taint in taints:
        effect = KUBERNETES_EFFECT[TaintEffect(taint["effect"])]
        if effect != "PreferNoSchedule" and not any(
            _tolerates(t, taint["key"], str(taint.get("value") or ""), effect) for t in tolerations
        ):
            return False
    return True


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
    for node_group in deployment.of_type("aws:eks/nodeGroup:NodeGroup"):
        template = _launch_template(deployment, node_group)
        if not _efa_interfaces(template):
            continue
        labels, where = _node_labels(node_group, template), _where(node_group)
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
                    _where(release),
                    "values.supportedInstanceLabels",
                    f"the chart's own list decides whether {labels['node.kubernetes.io/instance-type']} gets "
                    "the plugin (v0.5.8's lacks c7gn.metal and c8g); set it from the catalogue",
                )
            elif labels["node.kubernetes.io/instance-type"] not in supported:
                yield Finding(
                    "efa-device-plugin",
                    where,
                    "instanceTypes",
                    f"{labels['node.kubernetes.io/instance-type']} is not in the plugin's supportedInstanceLabels",
                )
            selector = values.get("nodeSelector") or {}
            if any(labels.get(key) != value for key, value in selector.items()):
                yield Finding(
                    "efa-device-plugin", where, "labels", f"the plugin's nodeSelector {selector} does not match"
                )
            if not _tolerated(node_group.inputs.get("taints") or [], values.get("tolerations") or []):
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
    for node_group in deployment.of_type("aws:eks/nodeGroup:NodeGroup"):
        if "NVIDIA" not in node_group.inputs.get("amiType", ""):
            continue
        labels, where = _node_labels(node_group, _launch_template(deployment, node_group)), _where(node_group)
        if not releases:
            yield Finding(
                "nvidia-device-plugin", where, "amiType", "no NVIDIA device plugin: no pod gets nvidia.com/gpu"
            )
        for release in releases:
            values = release.inputs.get("values", {})
            selector = values.get("nodeSelector") or {}
            terms = [
                {e["key"]: e["values"][0] for e in term.get("matchExpressions", [])}
                for term in (values.get("affinity") or {}).get("nodeAffinity", {})
                .get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
            ] or NVIDIA_PLUGIN_AFFINITY
            if any(labels.get(key) != value for key, value in selector.items()) or not any(
                all(labels.get(key) == value for key, value in term.items()) for term in terms
            ):
                yield Finding("nvidia-device-plugin", where, "labels", f"the plugin's nodeSelector {selector} or "
                              "node affinity does not match the group's labels")
            if not _tolerated(node_group.inputs.get("taints") or [], values.get("tolerations") or []):
                yield Finding(
                    "nvidia-device-plugin", where, "taints", "the plugin does not tolerate the group's taints"
                )


# The CRDs each pinned operator install applies (read from the releases): kubeflow/trainer v1.9.4
# manifests/base/crds/ and kubeflow/mpi-operator v0.8.0 deploy/v2beta1/mpi-operator.yaml.
TRAINING_OPERATOR_CRDS = {f"{kind}.kubeflow.org" for kind in ("pytorchjobs", "mpijobs", "tfjobs", "xgboostjobs",
                                                               "paddlejobs", "jaxjobs")}
INSTALLED_CRDS = {
    versions.TRAINING_OPERATOR_OVERLAY.format(version=versions.TRAINING_OPERATOR_VERSION): TRAINING_OPERATOR_CRDS,
    "infra/manifests/training-operator-without-mpijob": TRAINING_OPERATOR_CRDS - {"mpijobs.kubeflow.org"},
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
            yield Finding("crd-owner", _where(install), "directory" if "directory" in install.inputs else "file",
                          f"{crd} is also applied by {_where(installs[0])}; install one of them without it")


def kubernetes_version_in_standard_support(deployment: Deployment) -> Iterator[Finding]:
    """A minor version past EKS standard support costs $0.60 instead of $0.10 per cluster hour.

    Source: EKS user guide "Understand the Kubernetes version lifecycle on EKS" (14 months of
    standard support per minor); the end dates are in infra.versions.STANDARD_SUPPORT_ENDS.
    """
    for cluster in deployment.of_type("eks:index:Cluster"):
        version = str(cluster.inputs.get("version", ""))
        ends = versions.STANDARD_SUPPORT_ENDS.get(version)
        if ends is None or deployment.today > ends:
            known = ", ".join(f"{minor} until {end}" for minor, end in versions.STANDARD_SUPPORT_ENDS.items())
            yield Finding(
                "kubernetes-version",
                _where(cluster),
                "version",
                f"{version} is not in EKS standard support on {deployment.today} ({known})",
            )


def _pod_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod templates of a Job, an operator's job (`*ReplicaSpecs`) or a training runtime (JobSet's replicated jobs)."""
    spec = manifest.get("spec", {})
    replicated = spec.get("template", {}).get("spec", {}).get("replicatedJobs")
    if replicated is not None:
        return [job.get("template", {}).get("spec", {}).get("template", {}).get("spec", {}) for job in replicated]
    if "template" in spec:
        return [spec["template"].get("spec", {})]
    replica_specs = [value for key, value in spec.items() if key.endswith("ReplicaSpecs")]  # pytorch, mpi, ...
    return [replica.get("template", {}).get("spec", {}) for specs in replica_specs for replica in specs.values()]


def _extended_requests(pod: dict[str, Any]) -> set[str]:
    containers = [*pod.get("containers", []), *pod.get("initContainers", [])]
    return {
        name
        for c in containers
        for name in (c.get("resources") or {}).get("requests", {})
        if name not in CORE_RESOURCES
    }


def _announced(deployment: Deployment, node_group: Registration) -> set[str]:
    """Resources the autoscaler's node template gives the group's nodes (from the ASG's tags)."""
    prefix = f"{NODE_TEMPLATE}resources/"
    return {
        tag.inputs["tag"]["key"].removeprefix(prefix)
        for tag in deployment.of_type("aws:autoscaling/tag:Tag")
        if node_group.urn in tag.property_dependencies.get("autoscalingGroupName", [])
        and tag.inputs["tag"]["key"].startswith(prefix)
    }


def pods_fit_node_templates(deployment: Deployment) -> Iterator[Finding]:
    """A pod that requests a resource no node group announces stays Pending: nothing scales up for it.

    Source: kubernetes/autoscaler cluster-autoscaler-1.35.2, cloudprovider/aws/aws_manager.go
    (buildNodeFromTemplate, extractAllocatableResourcesFromAsg): a group scaled to zero offers
    only the `k8s.io/cluster-autoscaler/node-template/resources/*` its ASG announces; the
    scheduler places a pod only on a node its nodeSelector matches and whose taints it tolerates.
    """
    groups = [
        (g, _node_labels(g, _launch_template(deployment, g))) for g in deployment.of_type("aws:eks/nodeGroup:NodeGroup")
    ]
    for registration in deployment.kubernetes_objects():
        for pod in _pod_specs(registration.inputs):
            if not pod.get("containers"):
                continue
            selector, tolerations = pod.get("nodeSelector") or {}, pod.get("tolerations") or []
            fitting = [
                g
                for g, labels in groups
                if all(labels.get(k) == v for k, v in selector.items())
                and _tolerated(g.inputs.get("taints") or [], tolerations)
            ]
            if not fitting:
                yield Finding("schedulable", _where(registration), "nodeSelector", f"no node group matches {selector}")
                continue
            for resource in sorted(_extended_requests(pod)):
                if not any(resource in _announced(deployment, g) for g in fitting):
                    yield Finding(
                        "schedulable",
                        _where(registration),
                        f"resources.requests.{resource}",
                        "no matching node group announces it: the pod stays Pending and nothing scales up",
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
        for pod in _pod_specs(registration.inputs):
            volumes = {
                v["name"]
                for v in pod.get("volumes", [])
                if claims.get(str((v.get("persistentVolumeClaim") or {}).get("claimName")), "") in FS_GROUP_NOT_APPLIED
            }
            if not volumes or (pod.get("securityContext") or {}).get("runAsUser") == 0:
                continue
            first = next(
                (
                    c
                    for c in [*pod.get("initContainers", []), *pod.get("containers", [])]
                    if volumes & {m["name"] for m in c.get("volumeMounts", [])}
                ),
                {},
            )
            if (first.get("securityContext") or {}).get("runAsUser") != 0:
                yield Finding(
                    "volume-ownership",
                    _where(registration),
                    "initContainers",
                    f"{first.get('name')} is the first to use the FSx volume and does not run as root: the "
                    "volume's root is root's and fsGroup is never applied to it, so mkdir fails",
                )


def images_in_stack_region(deployment: Deployment) -> Iterator[Finding]:
    """An ECR image from another region is a cross-region pull at every scale-up, and fails where ECR is partitioned.

    Source: Amazon ECR user guide (registries are regional: `<account>.dkr.ecr.<region>.amazonaws.com`);
    AWS Deep Learning Containers publish each image in every supported region (available_images.md).
    """
    pattern = re.compile(r"^\d{12}\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com")
    for registration in deployment.kubernetes_objects():
        for pod in _pod_specs(registration.inputs):
            for container in [*pod.get("containers", []), *pod.get("initContainers", [])]:
                match = pattern.match(str(container.get("image", "")))
                if match and match.group(1) != deployment.region:
                    yield Finding(
                        "image-region",
                        _where(registration),
                        f"containers[{container.get('name')}].image",
                        f"pulled from {match.group(1)}, the stack is in {deployment.region}",
                    )


def no_access_entry_for_the_deployer(deployment: Deployment) -> Iterator[Finding]:
    """pulumi-eks makes the cluster's creator an admin; a second access entry for it fails.

    Source: pulumi/pulumi-eks v4 nodejs/eks/cluster.ts (`bootstrapClusterCreatorAdminPermissions:
    true`); EKS CreateAccessEntry returns ResourceInUseException for an existing principal.
    """
    for entry in deployment.of_type("aws:eks/accessEntry:AccessEntry"):
        if entry.inputs.get("principalArn") == deployment.deployer_arn:
            yield Finding("access-entry", _where(entry), "principalArn", f"{deployment.deployer_arn} deploys the stack")


def efa_ami_releases(deployment: Deployment) -> Iterator[Finding]:
    """The AL2023 STANDARD AMIs have the EFA kernel module only from release 20260505 on.

    Source: awslabs/amazon-eks-ami releases (AL2023 v20260505 adds the EFA driver to the
    standard x86 and ARM AMIs; the NVIDIA and Neuron AMIs always had it).
    """
    for node_group in deployment.of_type("aws:eks/nodeGroup:NodeGroup"):
        release = node_group.inputs.get("releaseVersion")
        standard = str(node_group.inputs.get("amiType", "")).endswith("_STANDARD")
        if release and standard and _efa_interfaces(_launch_template(deployment, node_group)):
            built = str(release).rsplit("-", 1)[-1]
            if built < versions.EFA_STANDARD_AMI_FLOOR:
                yield Finding(
                    "efa-ami",
                    _where(node_group),
                    "releaseVersion",
                    f"{release} predates {versions.EFA_STANDARD_AMI_FLOOR}, the first STANDARD AMI with EFA",
                )


RULES: tuple[Rule, ...] = (
    kubernetes_awaits,
    no_ttl_on_owned_objects,
    immutable_specs_replaced,
    managed_node_group_launch_templates,
    efa_interfaces_per_network_card,
    efa_device_plugin_schedules,
    nvidia_device_plugin_schedules,
    crds_have_one_owner,
    kubernetes_version_in_standard_support,
    pods_fit_node_templates,
    shared_volume_ownership,
    images_in_stack_region,
    no_access_entry_for_the_deployer,
    efa_ami_releases,
)


def check(deployment: Deployment) -> list[Finding]:
    """Every rule's findings, each once (a Master and its Workers share a pod template)."""
    return list(dict.fromkeys(finding for rule in RULES for finding in rule(deployment)))
