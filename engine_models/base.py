"""What every rule reads: the registrations of one stack run, findings, and shared lookups."""

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any

from eks_ddp.infra.aws.efa_node_group import EFA_RESOURCE, KUBERNETES_EFFECT, TaintEffect
from eks_ddp.infra.existing_cluster import DESCRIBED_GROUP
from eks_ddp.infra.facts import catalogue, quantities
from eks_ddp.infra.facts.efa_cards import EFA_INTERFACE_TYPES, NODE_CLASS, catalogue_cards
from eks_ddp.infra.facts.allocatable import NodeLauncher, efa_hugepages_mib
from eks_ddp.tools.mocking import Registration
from eks_ddp.infra.facts.node_room import node_allocatable
from eks_ddp.workloads.pod_templates import pod_templates
from eks_ddp.workloads.target import KUBERNETES_ARCH
from eks_ddp.workloads.training_pod import TRAINER_LABEL

K8S_PREFIX = "kubernetes:"
ARCHITECTURE = {"ARM_64": "arm64", "x86_64": "amd64"}


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
        return self.network_cards.get(instance_type, catalogue_cards(instance_type))

    def of_type(self, type_: str) -> list[Registration]:
        return sorted((r for r in self.registrations if r.type == type_), key=lambda r: r.name)

    def kubernetes_objects(self) -> list[Registration]:
        return [r for r in self.registrations if r.type.startswith(K8S_PREFIX) and "kind" in r.inputs]


Rule = Callable[[Deployment], Iterator[Finding]]


def located(registration: Registration) -> str:
    return f"{registration.type.split(':')[-1]} {registration.name}"


def annotations(registration: Registration) -> dict[str, str]:
    return registration.inputs.get("metadata", {}).get("annotations") or {}


def launch_template(deployment: Deployment, node_group: Registration) -> Registration | None:
    reference = node_group.inputs.get("launchTemplate") or {}
    return next(
        (r for r in deployment.of_type("aws:ec2/launchTemplate:LaunchTemplate") if r.id == reference.get("id")), None
    )


def group_instance_type(node_group: Registration, template: Registration | None) -> str | None:
    types = node_group.inputs.get("instanceTypes") or []
    return types[0] if types else (template.inputs.get("instanceType") if template else None)


def node_labels(node_group: Registration, template: Registration | None) -> dict[str, str]:
    """The labels a managed node carries: the group's, its architecture and its instance type."""
    ami = node_group.inputs.get("amiType", "")
    arch = next((value for key, value in ARCHITECTURE.items() if key in ami), "")
    return {
        **(node_group.inputs.get("labels") or {}),
        "kubernetes.io/arch": arch,
        "node.kubernetes.io/instance-type": group_instance_type(node_group, template) or "",
    }


def _tolerates(toleration: dict[str, Any], key: str, value: str, effect: str) -> bool:
    """kubernetes/api core/v1 toleration.go ToleratesTaint: an empty key with Exists matches every taint."""
    if toleration.get("effect") not in (None, "", effect):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration.get("key") == key
    return toleration.get("key") == key and str(toleration.get("value") or "") == value


def tolerated(taints: list[dict[str, Any]], tolerations: list[dict[str, Any]]) -> bool:
    """Whether a pod may run beside the node group's taints (EKS API effects, such as NO_SCHEDULE)."""
    for taint in taints:
        effect = KUBERNETES_EFFECT[TaintEffect(taint["effect"])]
        if effect != "PreferNoSchedule" and not any(
            _tolerates(t, taint["key"], str(taint.get("value") or ""), effect) for t in tolerations
        ):
            return False
    return True


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """A pod spec's containers in the order the kubelet starts them: init containers, then the others."""
    return [*pod.get("initContainers", []), *pod.get("containers", []), *pod.get("ephemeralContainers", [])]


def pod_specs(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod specs of `manifest`'s pod templates."""
    return [template.get("spec", {}) for template in pod_templates(manifest)]


def efa_interface_count(template: Registration | None) -> int:
    interfaces = (template.inputs.get("networkInterfaces") or []) if template else []
    return sum(1 for interface in interfaces if interface.get("interfaceType") in EFA_INTERFACE_TYPES)


GPU_RESOURCE, NEURON_RESOURCE = "nvidia.com/gpu", "aws.amazon.com/neuron"
NODE_TEMPLATE_RESOURCES = "k8s.io/cluster-autoscaler/node-template/resources/"


@dataclass(frozen=True)
class NodeSource:
    """Nodes the cluster can add for a pending pod: a managed node group or a Karpenter NodePool."""

    registration: Registration
    instance_type: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    """In either spelling of the effect (EKS's NO_SCHEDULE or Kubernetes's NoSchedule)."""
    efa_devices: int
    """EFA devices on each node (interfaces of type efa or efa-only)."""
    nvidia: bool
    """Whether its nodes run an NVIDIA AMI (the device plugin must reach them)."""
    offers: dict[str, float]
    """Extended resources the autoscaler believes a node it has not launched yet will have."""
    scaling: dict[str, int] = field(default_factory=dict)
    """A group's `scalingConfig` (minSize, maxSize, desiredSize); empty for a NodePool."""


def quantity(value: object) -> float:
    """A Kubernetes quantity (`32`, `5120Mi`, `2G`) as a number (infra.facts.quantities); a malformed one is an
    error, not zero."""
    exact = quantities.exact(value)
    if exact is None:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    return float(exact)


def _announced(deployment: Deployment, node_group: Registration) -> dict[str, float]:
    """kubernetes/autoscaler cluster-autoscaler-1.35.2, cloudprovider/aws/aws_manager.go (buildNodeFromTemplate,
    extractAllocatableResourcesFromAsg): a group at zero nodes offers only what its ASG's tags announce."""
    return {
        tag.inputs["tag"]["key"].removeprefix(NODE_TEMPLATE_RESOURCES): quantity(tag.inputs["tag"]["value"])
        for tag in deployment.of_type("aws:autoscaling/tag:Tag")
        if node_group.urn in tag.property_dependencies.get("autoscalingGroupName", [])
        and tag.inputs["tag"]["key"].startswith(NODE_TEMPLATE_RESOURCES)
    }


def _managed(deployment: Deployment, node_group: Registration) -> NodeSource:
    template = launch_template(deployment, node_group)
    return NodeSource(
        node_group,
        group_instance_type(node_group, template) or "",
        node_labels(node_group, template),
        list(node_group.inputs.get("taints") or []),
        efa_interface_count(template),
        "NVIDIA" in node_group.inputs.get("amiType", ""),
        _announced(deployment, node_group),
        dict(node_group.inputs.get("scalingConfig") or {}),
    )


def _karpenter(deployment: Deployment, pool: Registration) -> NodeSource:
    """aws/karpenter-provider-aws v1.14.1: a NodePool's nodes carry its template labels and the values its
    requirements pin (scheduling/requirements.go); pkg/providers/instancetype/types.go computeCapacity offers
    `vpc.amazonaws.com/efa` = the node class's `efa-only` entries (the type's maximum without any), the type's
    NVIDIA GPUs and its Neuron devices (`aws.amazon.com/neuron`)."""
    template = pool.inputs.get("spec", {}).get("template", {})
    pinned = {
        r["key"]: r["values"][0]
        for r in template.get("spec", {}).get("requirements", [])
        if r.get("operator") == "In" and len(r.get("values", [])) == 1
    }
    instance_type = pinned.get("node.kubernetes.io/instance-type", "")
    facts = catalogue.lookup(instance_type)
    reference = template.get("spec", {}).get("nodeClassRef", {}).get("name")
    node_class = next(
        (
            c
            for c in deployment.of_type(NODE_CLASS)
            if c.inputs.get("metadata", {}).get("name") == reference
        ),
        None,
    )
    interfaces = node_class.inputs.get("spec", {}).get("networkInterfaces") if node_class else None
    if interfaces is not None:
        efa = sum(1 for i in interfaces if i.get("interfaceType") == "efa-only")
    else:
        efa = (deployment.cards(instance_type) or 0) if facts and facts.efa else 0
    gpus, neuron = (facts.gpus, facts.neuron_devices) if facts else (0, 0)
    arch = KUBERNETES_ARCH[facts.architecture.value] if facts else ""
    labels = {
        **template.get("metadata", {}).get("labels", {}),
        **pinned,
        "kubernetes.io/arch": arch,
        "karpenter.sh/nodepool": str(pool.inputs.get("metadata", {}).get("name")),
    }
    extended = ((EFA_RESOURCE, efa), (GPU_RESOURCE, gpus), (NEURON_RESOURCE, neuron))
    offers: dict[str, float] = {name: count for name, count in extended if count}
    return NodeSource(
        pool, instance_type, labels, list(template.get("spec", {}).get("taints") or []), efa, gpus > 0, offers
    )


def _expression_holds(labels: dict[str, str], expression: dict[str, Any]) -> bool:
    """kubernetes v1.35 staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity: one match expression."""
    key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
    return {
        "In": key in labels and labels[key] in values,
        "NotIn": key not in labels or labels[key] not in values,
        "Exists": key in labels,
        "DoesNotExist": key not in labels,
    }.get(operator, False)


def admits(source: NodeSource, spec: dict[str, Any]) -> bool:
    """Whether a pod may run on the source's nodes: nodeSelector, required node affinity (any term, every
    expression) and the node's taints (kube-scheduler's NodeAffinity and TaintToleration filters)."""
    labels = {**source.labels, "kubernetes.io/hostname": "node", "kubernetes.io/os": "linux"}  # on every EKS node
    if any(labels.get(key) != value for key, value in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (
        (spec.get("affinity") or {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    )
    terms = (required or {}).get("nodeSelectorTerms") or []
    if terms and not any(all(_expression_holds(labels, e) for e in t.get("matchExpressions", [])) for t in terms):
        return False
    return tolerated(source.taints, spec.get("tolerations") or [])


def runtime_of(deployment: Deployment, trainjob: Registration) -> dict[str, Any]:
    """The inputs of the training runtime a TrainJob's `runtimeRef` names (empty when the stack has none)."""
    reference = trainjob.inputs.get("spec", {}).get("runtimeRef", {})
    return next(
        (
            r.inputs
            for r in deployment.kubernetes_objects()
            if r.inputs["kind"] == reference.get("kind") and r.inputs["metadata"].get("name") == reference.get("name")
        ),
        {},
    )


def _described(group: Registration) -> NodeSource:
    """A group of a cluster made elsewhere, as the stack describes it (infra/existing_cluster.ExistingNodeGroup): its
    nodes exist already, and offer what their kubelets and device plugins advertise (node_offer)."""
    described = group.inputs["described"]
    instance_type = described["instanceType"]
    facts = catalogue.lookup(instance_type)
    labels = {**(described.get("labels") or {}), "node.kubernetes.io/instance-type": instance_type,
              "kubernetes.io/arch": KUBERNETES_ARCH[facts.architecture.value] if facts else ""}
    source = NodeSource(group, instance_type, labels, list(described.get("taints") or []),
                        int(described.get("efaDevices", 0)), bool(facts and facts.gpus), {},
                        dict(described.get("scalingConfig") or {}))
    return replace(source, offers=_extended_offer(source))


def node_sources(deployment: Deployment) -> list[NodeSource]:
    """Every managed node group, every Karpenter NodePool and every described group of an existing cluster."""
    return [
        *(_managed(deployment, g) for g in deployment.of_type("aws:eks/nodeGroup:NodeGroup")),
        *(_karpenter(deployment, p) for p in deployment.of_type("kubernetes:karpenter.sh/v1:NodePool")),
        *(_described(g) for g in deployment.of_type(DESCRIBED_GROUP)),
    ]


def launcher_of(source: NodeSource) -> NodeLauncher:
    karpenter = source.registration.type.startswith("kubernetes:karpenter.sh")
    return NodeLauncher.KARPENTER if karpenter else NodeLauncher.MANAGED_NODE_GROUP


def node_offer(source: NodeSource) -> dict[str, float]:
    """One new node's allocatable as its kubelet reports it: CPU in millicores, memory in MiB, pods, EFA devices,
    GPUs. A model of the EKS AMI's bootstrap (infra.facts.allocatable), which no engine here can run; the local
    cluster's KWOK nodes and Karpenter's instance types are built from it."""
    instance = catalogue.lookup(source.instance_type)
    if instance is None:
        return {}
    node = node_allocatable(instance, launcher_of(source), source.efa_devices)
    return {"cpu": node.millicores, "memory": node.memory_mib, "pods": node.pods, **_extended_offer(source)}


def _extended_offer(source: NodeSource) -> dict[str, float]:
    """What one node's device plugins advertise, and the EFA huge pages (in bytes, as pods ask)."""
    instance = catalogue.lookup(source.instance_type)
    if instance is None:
        return {}
    extended = {
        EFA_RESOURCE: source.efa_devices,
        GPU_RESOURCE: instance.gpus,
        NEURON_RESOURCE: instance.neuron_devices,
        "hugepages-2Mi": efa_hugepages_mib(instance) * 2**20 if source.efa_devices else 0,
    }
    return {name: count for name, count in extended.items() if count}


def replicated_templates(deployment: Deployment, registration: Registration) -> list[tuple[dict[str, Any], int]]:
    """Each pod template of a Job, an operator's job or a TrainJob, with how many pods its controller makes of it
    (a TrainJob's: its runtime's at its numNodes, which replaces their parallelism: trainer v2.3.0 jobset.go)."""
    kind, spec = registration.inputs.get("kind"), registration.inputs.get("spec", {})
    if kind == "TrainJob":
        nodes = int(spec.get("trainer", {}).get("numNodes", 1))
        return [(template, nodes) for template in pod_templates(runtime_of(deployment, registration))]
    if kind == "Job":
        return [(spec.get("template", {}), int(spec.get("parallelism", 1)))]
    replica_specs = [value for key, value in spec.items() if key.endswith("ReplicaSpecs")]  # pytorch, mpi, ...
    return [(replica.get("template", {}), int(replica.get("replicas", 1))) for specs in replica_specs
            for replica in specs.values()]


def training_templates(deployment: Deployment) -> Iterator[tuple[dict[str, Any], int]]:
    """The pod templates of the training pods (TRAINER_LABEL) and their counts."""
    for registration in deployment.kubernetes_objects():
        for template, count in replicated_templates(deployment, registration):
            if TRAINER_LABEL.items() <= (template.get("metadata", {}).get("labels") or {}).items():
                yield template, count
