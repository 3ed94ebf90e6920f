"""The cluster rehearsal: every pod a stack creates, placed together on the nodes its node sources can provide.

Each rule of stack.engine_rules reads one object; here the parts meet. Nodes come from every managed node group (up
to `maxSize`) and Karpenter NodePool (up to its CPU limit), with the allocatable of the engine that launches them
(infra.facts.allocatable) less every DaemonSet that lands there (stack.cluster.addons). Pods are the stack's own (Jobs,
PyTorchJob and MPIJob replicas, a TrainJob's runtime pods, add-on controllers) placed with kube-scheduler's filters
(kubernetes v1.35 pkg/scheduler/framework/plugins: noderesources Fit, tainttoleration, nodeaffinity (nodeSelector and
required terms), interpodaffinity (required anti-affinity on the hostname), nodeports aside). An effective request is
the larger of the biggest init container's and the containers' sum (resource.PodRequests). Of the nodes that fit,
a pod goes to the one with the larger free share (noderesources LeastAllocated, the default score), so add-ons
without a node selector land on big training nodes as they would. Pods created together compete: the rehearsal
places the training pods last, the scheduler's worst order for them. Pods that `pulumi up`
creates only after an object it awaits to completion (a gating check) are placed after that object's pods finished.
"""

from dataclasses import dataclass, field
from typing import Any

from eks_ddp.infra.facts import catalogue
from eks_ddp.infra.facts.allocatable import NodeLauncher, efa_hugepages_mib
from eks_ddp.stack.cluster.addons import Workload, addon_workloads
from eks_ddp.stack.engine_rules.base import (
    EFA_RESOURCE,
    GPU_RESOURCE,
    NEURON_RESOURCE,
    Deployment,
    Finding,
    NodeSource,
    admits,
    located,
    node_sources,
    runtime_of,
    tolerated,
)
from eks_ddp.stack.engine_rules.pulumi_kubernetes import awaited_to_completion, phases
from eks_ddp.stack.engine_rules.scheduling import pod_requests
from eks_ddp.stack.mocking import Registration
from eks_ddp.workloads.target import node_allocatable
from eks_ddp.workloads.training_pod import TRAINER_LABEL

HOSTNAME = "kubernetes.io/hostname"


@dataclass
class Node:
    source: NodeSource
    name: str
    free: dict[str, float]
    pods: list["Pod"] = field(default_factory=list)
    taints: list[dict[str, Any]] = field(default_factory=list)
    """Taints set on this node alone after it joined (the source's own are in `source.taints`)."""

    def admits(self, pod: "Pod") -> bool:
        return admits(self.source, pod.spec) and tolerated(self.taints, pod.spec.get("tolerations") or [])


@dataclass(frozen=True)
class Pod:
    owner: str
    """The object that creates it (`PyTorchJob eks-ddp-train-job`), as findings name it."""
    name: str
    spec: dict[str, Any]
    training: bool = False
    phase: int = 0
    """0: created with the stack; n: after the run-to-completion objects of phase n-1 it depends on finished."""
    completes: bool = False
    """Its object is awaited to completion: its room is free again for the next phase."""
    daemon: bool = False
    """A DaemonSet's: it belongs to its node and is never placed elsewhere."""

    def requests(self) -> dict[str, float]:
        return {"pods": 1, **pod_requests(self.spec)}


def launcher_of(source: NodeSource) -> NodeLauncher:
    karpenter = source.registration.type.startswith("kubernetes:karpenter.sh")
    return NodeLauncher.KARPENTER if karpenter else NodeLauncher.MANAGED_NODE_GROUP


def node_offer(source: NodeSource) -> dict[str, float]:
    """One new node's allocatable under its engine: CPU in millicores, memory in MiB, pods, EFA devices, GPUs."""
    instance = catalogue.lookup(source.instance_type)
    if instance is None:
        return {}
    node = node_allocatable(instance, launcher_of(source), source.efa_devices)
    offer = {"cpu": node.millicores, "memory": node.memory_mib, "pods": node.pods}
    extended = {
        EFA_RESOURCE: source.efa_devices,
        GPU_RESOURCE: instance.gpus,
        NEURON_RESOURCE: instance.neuron_devices,
        "hugepages-2Mi": efa_hugepages_mib(instance) * 2**20 if source.efa_devices else 0,  # bytes, as pods ask
    }
    return {**offer, **{name: count for name, count in extended.items() if count}}


# A node advertises a device only once its device plugin runs there (kubelet's device manager): the DaemonSet that
# must land on the node for each extended resource.
DEVICE_PLUGINS = {
    EFA_RESOURCE: "aws-efa-k8s-device-plugin",
    GPU_RESOURCE: "nvidia-device-plugin",
    NEURON_RESOURCE: "neuron-device-plugin",
}


def max_nodes(source: NodeSource) -> int:
    """A managed group's maxSize; a NodePool's CPU limit in nodes of its one instance type."""
    inputs = source.registration.inputs
    if launcher_of(source) == NodeLauncher.MANAGED_NODE_GROUP:
        return int((inputs.get("scalingConfig") or {}).get("maxSize", 0))
    instance = catalogue.lookup(source.instance_type)
    cpu = (inputs.get("spec", {}).get("limits") or {}).get("cpu")
    return int(float(cpu) // instance.vcpus) if instance and cpu is not None else 0


def _spreads_by_host(spec: dict[str, Any]) -> bool:
    anti = (spec.get("affinity") or {}).get("podAntiAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    return any(term.get("topologyKey") == HOSTNAME for term in anti or [])


def _fits(node: Node, pod: Pod) -> bool:
    if _spreads_by_host(pod.spec) and any(_family(p) == _family(pod) for p in node.pods):
        return False
    return all(node.free.get(name, 0) >= amount for name, amount in pod.requests().items())


def _family(pod: Pod) -> tuple[str, str]:
    """Replicas of one workload share an owner and a name before their index."""
    return pod.owner, pod.name.rsplit("-", 1)[0]


def _least_allocated(node: Node) -> float:
    """kube-scheduler's default score (NodeResourcesFit, LeastAllocated, CPU and memory weighted alike): the node
    with the larger share free wins, so a big empty training node draws the add-ons a system node would take."""
    offer = node_offer(node.source)
    return sum(node.free.get(name, 0) / offer[name] for name in ("cpu", "memory") if offer.get(name)) / 2


def _take(node: Node, pod: Pod) -> None:
    for name, amount in pod.requests().items():
        node.free[name] = node.free.get(name, 0) - amount
    node.pods.append(pod)


def _replicas(owner: str, name: str, spec: dict[str, Any], count: int, phase: int) -> list[Pod]:
    labels = spec.get("metadata", {}).get("labels") or {}
    training = TRAINER_LABEL.items() <= labels.items()
    pod = spec.get("spec", {})
    return [Pod(owner, f"{name}-{index}", pod, training, phase) for index in range(count)]


def _completing(pods: list[Pod]) -> list[Pod]:
    return [Pod(p.owner, p.name, p.spec, p.training, p.phase, completes=True) for p in pods]


def object_pods(deployment: Deployment, registration: Registration, phase: int) -> list[Pod]:
    """The pods the object's controller creates: a Job's parallelism, an operator job's replicas (PyTorchJob,
    MPIJob), a TrainJob's runtime jobs with the TrainJob's node count (jobset.go: numNodes replaces the trainer
    job's parallelism)."""
    inputs, owner = registration.inputs, located(registration)
    kind, spec = inputs.get("kind"), inputs.get("spec", {})
    if kind == "Job":
        return _replicas(owner, "pod", spec.get("template", {}), int(spec.get("parallelism", 1)), phase)
    if kind in ("PyTorchJob", "MPIJob"):
        replicas = spec.get("pytorchReplicaSpecs") or spec.get("mpiReplicaSpecs") or {}
        return [
            pod
            for role, replica in replicas.items()
            for pod in _replicas(owner, role, replica.get("template", {}), int(replica.get("replicas", 1)), phase)
        ]
    if kind == "TrainJob":
        runtime = runtime_of(deployment, registration)
        nodes = int(spec.get("trainer", {}).get("numNodes", 1))
        jobs = runtime.get("spec", {}).get("template", {}).get("spec", {}).get("replicatedJobs", [])
        return [
            pod
            for job in jobs
            for pod in _replicas(owner, job["name"], job["template"]["spec"]["template"], nodes, phase)
        ]
    return []


def _addon_pods(workloads: list[Workload]) -> list[Pod]:
    return [
        Pod(w.owner, f"{w.name}-{index}", w.pod)
        for w in workloads
        if w.kind != "DaemonSet"
        for index in range(w.replicas)
    ]


def _amount(name: str, amount: float) -> str:
    """CPU in cores, memory in MiB, the rest as counted."""
    return {"cpu": f"{amount / 1000:g} CPU", "memory": f"{amount:.0f} MiB"}.get(name, f"{amount:g} {name}")


def _shortfall(node: Node, pod: Pod) -> str:
    short = [
        f"{_amount(name, amount - node.free.get(name, 0))} short"
        for name, amount in pod.requests().items()
        if node.free.get(name, 0) < amount
    ]
    others = sorted({f"{p.owner} {p.name}".strip() for p in node.pods if not p.training} - {""})
    held = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    return f"{node.name}: {', '.join(short) or 'one replica per node'}" + (f" (beside {held})" if held else "")


class Cluster:
    """Nodes launched on demand from the stack's node sources, each with the DaemonSets that land on it."""

    def __init__(self, deployment: Deployment, daemon_sets: list[Workload]) -> None:
        self.sources = node_sources(deployment)
        self.daemon_sets = daemon_sets
        self.nodes: list[Node] = []
        self.findings: list[Finding] = []
        self.placements: list[tuple[Pod, Node]] = []
        """Every pod placed and its node, in order, the pods that finished since included."""

    def launch(self, source: NodeSource) -> Node | None:
        launched, offer = [n for n in self.nodes if n.source is source], node_offer(source)
        if len(launched) >= max_nodes(source) or not offer:
            return None
        node = Node(source, f"{source.registration.name}-{len(launched) + 1}", offer)
        for daemon in (d for d in self.daemon_sets if admits(source, d.pod)):
            pod = Pod(daemon.owner, daemon.name, daemon.pod, daemon=True)
            if not _fits(node, pod):
                self.findings.append(
                    Finding(
                        "placement", daemon.owner, daemon.name, f"the DaemonSet does not fit {_shortfall(node, pod)}"
                    )
                )
            _take(node, pod)
        for resource, plugin in DEVICE_PLUGINS.items():
            if resource in node.free and not any(p.daemon and p.name == plugin for p in node.pods):
                del node.free[resource]
        self.nodes.append(node)
        return node

    def place(self, pod: Pod) -> None:
        fitting = [n for n in self.nodes if n.admits(pod) and _fits(n, pod)]
        if fitting:
            self._take(max(fitting, key=_least_allocated), pod)
            return
        for source in (s for s in self.sources if admits(s, pod.spec)):
            node = self.launch(source)
            if node is not None and _fits(node, pod):
                self._take(node, pod)
                return
            if node is not None:  # no engine launches a node the pod does not fit
                self.nodes.remove(node)
        self.findings.append(Finding("placement", pod.owner, pod.name, self._why_not(pod)))

    def _take(self, node: Node, pod: Pod) -> None:
        _take(node, pod)
        self.placements.append((pod, node))

    def _why_not(self, pod: Pod) -> str:
        wanted = ", ".join(_amount(name, amount) for name, amount in sorted(pod.requests().items()) if name != "pods")
        matching = [s for s in self.sources if admits(s, pod.spec)]
        if not matching:
            return f"no node source admits it (nodeSelector {pod.spec.get('nodeSelector') or {}}): it stays Pending"
        where = "; ".join(
            f"{located(s.registration)} at {len([n for n in self.nodes if n.source is s])} of {max_nodes(s)} "
            f"nodes ({s.instance_type})"
            for s in matching
        )
        nodes = [_shortfall(n, pod) for n in self.nodes if n.admits(pod)]
        for source in matching if not nodes else []:
            probe = self.launch(source)  # a new node, with its DaemonSets: what it would lack
            if probe is not None:
                nodes.append(f"a new {_shortfall(probe, pod)}")
                self.nodes.remove(probe)
        return f"needs {wanted}; {where}: {'; '.join(nodes) or 'no node can be added'}: it stays Pending"

    def remove(self, node: Node, pod: Pod) -> None:
        node.pods.remove(pod)
        for name, amount in pod.requests().items():
            node.free[name] += amount

    def finish(self, phase: int) -> None:
        """The run-to-completion pods of `phase` complete and give their room back."""
        for node in self.nodes:
            for pod in [p for p in node.pods if p.phase == phase and p.completes]:
                self.remove(node, pod)

    def taint(self, node: Node, taint: dict[str, Any]) -> list[Pod]:
        """Taint one node; with NO_EXECUTE the taint manager evicts the pods that do not tolerate it. Returns the
        evicted pods their controllers recreate elsewhere (the caller places them); a DaemonSet's are just gone."""
        node.taints.append(taint)
        evicted = [p for p in node.pods if not tolerated([taint], p.spec.get("tolerations") or [])]
        for pod in evicted:
            self.remove(node, pod)
        return [pod for pod in evicted if not pod.daemon]

    def node_of(self, pod: Pod) -> Node | None:
        return next((n for n in self.nodes if pod in n.pods), None)


def pods_of(deployment: Deployment, workloads: list[Workload]) -> list[Pod]:
    """Every pod the stack creates but the DaemonSets' (placed with each node)."""
    stages = phases(deployment)
    own = []
    for registration in (r for r in deployment.kubernetes_objects() if r.urn in stages):
        pods = object_pods(deployment, registration, stages[registration.urn])
        own += _completing(pods) if awaited_to_completion(registration) else pods
    return [*_addon_pods(workloads), *own]


def rehearse_placement(deployment: Deployment) -> list[Finding]:
    """Every pod placed, phase by phase, training pods last in each: one finding per pod that stays Pending."""
    return list(dict.fromkeys(placed(deployment).findings))


def placed(deployment: Deployment) -> Cluster:
    """The cluster once every pod of the stack has been placed (its findings: the pods that stay Pending)."""
    workloads = addon_workloads(deployment)
    cluster = Cluster(deployment, [w for w in workloads if w.kind == "DaemonSet"])
    for source in cluster.sources:  # a managed group starts at its minSize
        for _ in range(int((source.registration.inputs.get("scalingConfig") or {}).get("minSize", 0))):
            cluster.launch(source)
    pods = pods_of(deployment, workloads)
    for phase in sorted({pod.phase for pod in pods}):
        for pod in sorted((p for p in pods if p.phase == phase), key=lambda p: p.training):
            cluster.place(pod)
        cluster.finish(phase)
    return cluster
