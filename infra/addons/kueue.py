"""Kueue: the training groups shared by queues, gang admission, team quotas and placement on EC2's network (v0.17.0).

What Kueue decides, read from sigs.k8s.io/kueue@v0.17.0 (tests/cluster/engines/kueue builds that manager, and the
cluster tests run it):
- A job labelled `kueue.x-k8s.io/queue-name` is suspended at creation by Kueue's webhook and started once its whole
  workload fits its ClusterQueue's quota (pkg/controller/jobframework/defaults.go): never a part of its pods.
- `waitForPodsReady` (apis/config/v1beta2, no `enable` field: present is on) evicts an admitted job whose pods are
  not all ready within its timeout (PODS_READY_TIMEOUT by default) and requeues it with a backoff: a job that cannot
  get all its nodes gives back what it holds (pkg/controller/core/workload_controller.go reconcileNotReadyTimeout).
- Topology-aware scheduling counts only nodes that exist, are Ready and schedulable
  (pkg/cache/scheduler/tas_nodes_cache.go): a group at zero nodes is placed only through a ProvisioningRequest
  admission check, which delays the placement until the Cluster Autoscaler made the nodes
  (pkg/scheduler/flavorassigner/tas_flavorassigner.go). Karpenter has no such check (kubernetes-sigs/kueue#5133, open),
  so its node pools are queued by quota alone, never by topology.
- The ProvisioningRequest API must exist when Kueue starts: without it the check's controller is never set up, and its
  ClusterQueues stay inactive (cmd/kueue/main.go, ServerSupportsProvisioningRequest): the release waits for the CRD.
"""

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, NotRequired, TypedDict

import pulumi
import pulumi_kubernetes as k8s
import yaml

from eks_ddp.infra.addons import helm
from eks_ddp.infra.aws.cluster import GROUP_LABEL, SYSTEM_LABEL
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import instance_facts, quantities, versions
from eks_ddp.infra.facts.allocatable import NodeLauncher
from eks_ddp.infra.facts.catalogue import InstanceType
from eks_ddp.infra.facts.network_topology import CLOSEST_LAYER, NETWORK_LAYERS, has_topology
from eks_ddp.infra.facts.node_room import DAEMON_SETS_MIB, daemon_sets_millicores, node_allocatable
from eks_ddp.infra.node_group import EFA_RESOURCE, KUBERNETES_EFFECT, NodeGroup, NodeGroupShape, TaintEffect
from eks_ddp.infra.options import waits_for

COMPONENT = "Kueue"
API = "kueue.x-k8s.io/v1beta2"
NAMESPACE = "kueue-system"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""The label that submits a job to a LocalQueue (pkg/controller/constants)."""
TOPOLOGY_ANNOTATIONS = {
    "required": "kueue.x-k8s.io/podset-required-topology",
    "preferred": "kueue.x-k8s.io/podset-preferred-topology",
}
"""The pod template annotations that ask for one topology domain (apis/kueue/v1beta2/topology_types.go)."""
PODSET_GROUP_ANNOTATION = "kueue.x-k8s.io/podset-group-name"
"""Pod sets fitted into one topology domain together (the same file: PodSetGroupName)."""
DEFAULT_QUEUE = "training"
"""The one queue without teams. Not `default`: a LocalQueue of that name takes every job of its namespace that names
none (LocalQueueDefaulting, GA), the system group's data and evaluation Jobs too, which no flavor here covers."""
COHORT = "eks-ddp"
TOPOLOGY = "ec2-network"
HOSTNAME = "kubernetes.io/hostname"
PROVISIONING = "eks-ddp-provisioning"
PROVISIONING_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
"""All of a job's pods on one group in one scale-up, or none (cluster-autoscaler 1.35.2 besteffortatomic; on AWS the
ASG's desired size is raised in one call, EC2 may still deliver fewer)."""
PODS_READY_TIMEOUT = "10m"
"""How long an admitted job may take to have every pod ready, by default: a node's boot and join and an image pull take
up to about 6 minutes (infra/addons/helm.py), Karpenter's launch included (Kueue admits its jobs before the nodes
exist)."""
DURATION = re.compile(r"(\d+(\.\d+)?(h|m|s))+")
"""A Go duration in hours, minutes and seconds, as Kueue's configuration reads it (metav1.Duration)."""
DEVICES = ("nvidia.com/gpu", "aws.amazon.com/neuron", EFA_RESOURCE)
FRAMEWORKS = ("batch/job", "kubeflow.org/pytorchjob", "kubeflow.org/mpijob", "trainer.kubeflow.org/trainjob")
"""What the stack submits: Indexed Jobs and the EFA check, PyTorchJobs, the NCCL check's MPIJob, TrainJobs."""


class QueueTopology(str, Enum):
    """Where a queued job's pods go on EC2's network: all under one layer-3 network node, there when they fit, or
    anywhere."""

    REQUIRED = "required"
    """All pods under one layer-3 network node, or the job waits."""
    PREFERRED = "preferred"
    """Under one layer-3 network node when they fit there, else spread as little as Kueue can."""
    OFF = "off"
    """Anywhere in the group."""


class QueueingArgs(TypedDict):
    """How jobs share the groups through Kueue: teams' quotas and placement on EC2's network."""

    quotas: NotRequired[Mapping[str, Mapping[str, Mapping[str, str]]]]
    """Per team, per training group, what the team is guaranteed: `cpu`, `memory` or a device (`nvidia.com/gpu`, ...)
    as a Kubernetes quantity. Each team gets a ClusterQueue and a LocalQueue of its name, all in one cohort, and
    borrows what the others leave unused; what no team is given is the cohort's, for any to borrow. Default: one
    queue, `training`, with all the groups can reach."""
    topology: NotRequired[QueueTopology]
    """How a job's pods are placed on EC2's network: all under one layer-3 network node (required), there when they
    fit (preferred, the default) or anywhere (off). Applies to groups whose type EC2 gives a topology and whose nodes
    Kueue can see before it admits (not Karpenter's)."""
    pods_ready_timeout: NotRequired[str]
    """How long an admitted job may take to have all its pods ready before Kueue evicts it, gives its quota back and
    requeues it with a backoff, as a duration (`10m`, `1h30m`; default PODS_READY_TIMEOUT). Raise it for images that
    take longer to pull."""


@dataclass(frozen=True)
class Flavor:
    """One training group as Kueue sees it."""

    name: str
    labels: dict[str, str]
    taints: list[dict[str, str]]
    reach: dict[str, int]
    """What the group's most nodes offer workloads: cpu in millicores, memory in MiB, devices by count."""
    topology: bool
    """Placed by network topology (its type has one and Kueue sees its nodes before admitting)."""
    provisioned: bool
    """Admitted once the Cluster Autoscaler provisioned its nodes (a ProvisioningRequest admission check)."""


UNITS = {"cpu": "m", "memory": "Mi"}


def reach(group: NodeGroup, instance: InstanceType) -> dict[str, int]:
    """What `max_size` nodes of the group offer workloads: each node's allocatable less the daemon sets' budget."""
    efa = group.efa_devices(instance)
    node = node_allocatable(instance, group.launcher, efa)
    per_node = {
        "cpu": node.millicores - daemon_sets_millicores(instance),
        "memory": node.memory_mib - DAEMON_SETS_MIB,
        "nvidia.com/gpu": instance.gpus,
        "aws.amazon.com/neuron": instance.neuron_devices,
        EFA_RESOURCE: efa,
    }
    return {resource: amount * group.max_size for resource, amount in per_node.items() if amount}


def flavors(groups: Sequence[NodeGroupShape], topology: QueueTopology, provisioning: bool,
            describe: Callable[[str], InstanceType] = instance_facts.describe) -> list[Flavor]:
    """Each group's flavor. Topology applies where EC2 describes the type's network and Kueue sees nodes before
    admitting: a group that scales does so only through a ProvisioningRequest (`provisioning`)."""
    found = []
    for shape in groups:
        group = NodeGroup.of(shape)
        scales = group.min_size < group.max_size or group.launcher == NodeLauncher.KARPENTER
        seen = not scales or (provisioning and group.launcher != NodeLauncher.KARPENTER)
        found.append(Flavor(
            group.name,
            {GROUP_LABEL: group.name},
            [{"key": t["key"], "value": str(t.get("value", "")), "effect": KUBERNETES_EFFECT[TaintEffect(t["effect"])]}
             for t in group.taints],
            reach(group, describe(group.instance_type)),
            topology != QueueTopology.OFF and seen and has_topology(group.instance_type),
            provisioning and scales,
        ))
    return found


def amount(resource: str, value: object) -> int | None:
    """A quantity in the flavor's units (millicores, MiB, devices), or None when it is not one."""
    parts, total = quantities.split(value), quantities.exact(value)
    if parts is None or total is None:
        return None
    suffix = parts[1]
    if resource == "cpu":
        millicores = total * 1000
        return int(millicores) if millicores == int(millicores) and suffix in ("", "m") else None
    if resource == "memory":
        return None if suffix == "m" else int(total / 2**20)
    return int(total) if suffix == "" and total == int(total) else None


def team_quotas(queueing: QueueingArgs, found: Sequence[Flavor]) -> dict[str, dict[str, dict[str, int]]]:
    """Each team's guaranteed amounts by flavor and resource; raises InvalidArgument for a group, resource or quantity
    the groups do not have, or for teams asking together more than a group can reach."""
    by_name = {flavor.name: flavor for flavor in found}
    teams: dict[str, dict[str, dict[str, int]]] = {}
    quotas = queueing.get("quotas") or {}
    if not isinstance(quotas, Mapping):
        raise InvalidArgument(COMPONENT, "queueing.quotas", quotas, "give a map of teams")
    for team, groups in quotas.items():
        where = f"queueing.quotas.{team}"
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", str(team)):
            raise InvalidArgument(COMPONENT, where, team, "name a team in lower case letters, digits and '-'")
        if not isinstance(groups, Mapping):
            raise InvalidArgument(COMPONENT, where, groups, "give a map of node groups")
        teams[team] = {}
        for group, resources in groups.items():
            if not isinstance(resources, Mapping):
                raise InvalidArgument(COMPONENT, f"{where}.{group}", resources, "give a map of resources")
            if group not in by_name:
                raise InvalidArgument(COMPONENT, f"{where}.{group}", resources,
                                      f"name a training group: {', '.join(by_name) or 'there are none'}")
            teams[team][group] = {}
            for resource, value in resources.items():
                offered = by_name[group].reach
                if resource not in offered:
                    raise InvalidArgument(COMPONENT, f"{where}.{group}.{resource}", value,
                                          f"the group's nodes offer {', '.join(offered)}")
                parsed = amount(resource, value)
                if parsed is None:
                    raise InvalidArgument(COMPONENT, f"{where}.{group}.{resource}", value,
                                          f"give a quantity such as {_example(resource)}")
                teams[team][group][resource] = parsed
    for flavor in found:
        for resource, limit in flavor.reach.items():
            given = 0
            for team, quotas in teams.items():
                asked = quotas.get(flavor.name, {}).get(resource, 0)
                if given + asked > limit:
                    before = f" ({_quantity(resource, given)} given to the teams before it)" if given else ""
                    raise InvalidArgument(COMPONENT, f"queueing.quotas.{team}.{flavor.name}.{resource}",
                                          _quantity(resource, asked),
                                          f"the teams together may have at most what {flavor.name}'s nodes can offer "
                                          f"(its maxSize nodes, or desiredSize without an autoscaler), "
                                          f"{_quantity(resource, limit)}{before}")
                given += asked
    return teams


def _example(resource: str) -> str:
    return {"cpu": "'64' or '500m'", "memory": "'256Gi'"}.get(resource, "8")


def _quantity(resource: str, value: int) -> str:
    return f"{value}{UNITS.get(resource, '')}"


def _resource_group(found: Sequence[Flavor], quotas: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """Every flavor with every resource any of them offers: Kueue wants each flavor of a group to list them all."""
    covered = [r for r in ("cpu", "memory", *DEVICES) if any(r in flavor.reach for flavor in found)]
    return {
        "coveredResources": covered,
        "flavors": [
            {"name": flavor.name, "resources": [
                {"name": r, "nominalQuota": _quantity(r, quotas.get(flavor.name, {}).get(r, 0))} for r in covered]}
            for flavor in found
        ],
    }


def render(found: Sequence[Flavor], teams: Mapping[str, Mapping[str, Mapping[str, int]]], namespace: str
           ) -> list[dict[str, Any]]:
    """The flavors, the topology, the provisioning check, the cohort's and each team's ClusterQueue and its
    LocalQueue in the training namespace (one `training` queue with every group's reach when there are no teams)."""
    objects: list[dict[str, Any]] = []
    if any(flavor.topology for flavor in found):
        levels = [{"nodeLabel": label} for label in (*NETWORK_LAYERS, HOSTNAME)]
        objects.append(_object("Topology", TOPOLOGY, {"levels": levels}))
    for flavor in found:
        spec: dict[str, Any] = {"nodeLabels": flavor.labels}
        if flavor.taints:
            spec["nodeTaints"] = flavor.taints
        if flavor.topology:
            spec["topologyName"] = TOPOLOGY
        objects.append(_object("ResourceFlavor", flavor.name, spec))
    provisioned = [flavor.name for flavor in found if flavor.provisioned]
    if provisioned:
        provisioning = {"provisioningClassName": PROVISIONING_CLASS}
        objects.append(_object("ProvisioningRequestConfig", PROVISIONING, provisioning))
        objects.append(_object("AdmissionCheck", PROVISIONING, {
            "controllerName": "kueue.x-k8s.io/provisioning-request",
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": PROVISIONING}}))
    whole = {flavor.name: flavor.reach for flavor in found}
    if teams:
        left = {f.name: {r: n - sum(t.get(f.name, {}).get(r, 0) for t in teams.values()) for r, n in f.reach.items()}
                for f in found}
        objects.append(_object("Cohort", COHORT, {"resourceGroups": [_resource_group(found, left)]}))
    for queue, quotas in (teams or {DEFAULT_QUEUE: whole}).items():
        spec = {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [_resource_group(found, quotas)],
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        }
        if teams:
            spec["cohortName"] = COHORT
        if provisioned:
            spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": PROVISIONING, "onFlavors": provisioned}]}
        objects.append(_object("ClusterQueue", queue, spec))
        objects.append(_object("LocalQueue", queue, {"clusterQueue": queue}, namespace))
    return objects


def _object(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": API, "kind": kind, "metadata": metadata, "spec": spec}


def pods_ready_timeout(queueing: QueueingArgs) -> str:
    """The gang admission's timeout; raises InvalidArgument for anything but a duration above zero."""
    timeout = queueing.get("pods_ready_timeout", PODS_READY_TIMEOUT)
    if not DURATION.fullmatch(str(timeout)) or not re.search(r"[1-9]", str(timeout)):
        raise InvalidArgument(COMPONENT, "queueing.pods_ready_timeout", timeout,
                              "give a duration above zero in h, m and s, such as '10m' or '1h30m'")
    return timeout


def manager_config(timeout: str) -> dict[str, Any]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2): the chart's defaults, with gang admission, the
    integrations the stack submits and only labelled jobs managed. Huge pages (the NCCL check's) are left out of the
    quotas: they come with the node, not from a group's reach."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "manageJobsWithoutQueueName": False,
        "waitForPodsReady": {
            "timeout": timeout,
            "blockAdmission": False,
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
        },
        "integrations": {"frameworks": list(FRAMEWORKS)},
        "resources": {"excludeResourcePrefixes": ["hugepages-"]},
    }


class KueueArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    groups: Sequence[NodeGroupShape]
    """The groups' shapes, the system group's (platform.system_shape: the NCCL check's launcher) and the training
    groups' (TrainingNodes.shape): one flavor each."""
    namespace: str
    """The training namespace: its LocalQueues."""
    queueing: QueueingArgs
    """Teams' quotas and topology."""
    provisioning: NotRequired[bool]
    """The Cluster Autoscaler launches the groups: admission waits for a ProvisioningRequest (default false)."""
    chart_folder: NotRequired[str]
    """The chart at versions.KUEUE_CHART's version in a local folder, as its release packaged it."""


def plan(groups: Sequence[NodeGroupShape], queueing: QueueingArgs, provisioning: bool,
         describe: Callable[[str], InstanceType] = instance_facts.describe
         ) -> tuple[list[Flavor], dict[str, dict[str, dict[str, int]]]]:
    """The flavors and each team's quotas; raises InvalidArgument for settings the groups cannot take."""
    topology = queueing.get("topology", QueueTopology.PREFERRED)
    if topology not in tuple(QueueTopology):
        raise InvalidArgument(COMPONENT, "queueing.topology", topology,
                              f"use one of {', '.join(t.value for t in QueueTopology)}")
    pods_ready_timeout(queueing)
    found = flavors(groups, QueueTopology(topology), provisioning, describe)
    training = [(flavor, shape) for flavor, shape in zip(found, groups) if flavor.name != SYSTEM_LABEL[GROUP_LABEL]]
    if topology == QueueTopology.REQUIRED and training and not any(flavor.topology for flavor, _ in training):
        # Required where it can hold; a group it cannot (another type in the same stack) is placed anywhere, and the
        # preview says which groups are placed by topology.
        raise InvalidArgument(COMPONENT, "queueing.topology", QueueTopology(topology).value,
                              "; ".join(_no_topology(shape) for _, shape in training))
    return found, team_quotas(queueing, found)


def _no_topology(shape: NodeGroupShape) -> str:
    """Why a group's jobs cannot be placed by network topology."""
    group = NodeGroup.of(shape)
    name = group.name
    if not has_topology(group.instance_type):
        return f"EC2 gives {group.instance_type} ({name}) no network topology: use preferred or off"
    return (f"Kueue admits {name}'s jobs before Karpenter makes their nodes and places by topology only on "
            "nodes it sees (kubernetes-sigs/kueue#5133): use preferred or off, or the Cluster Autoscaler")


class Kueue(pulumi.ComponentResource):
    """Kueue's chart (versions.KUEUE_CHART) on the system nodes, and the queues of the training groups."""

    release: k8s.helm.v3.Release
    """The release; the queues and every queued job depend on it (its CRDs and webhooks)."""
    queues: list[str]
    """The LocalQueues of the training namespace, the default first."""

    def __init__(self, name: str, args: KueueArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        found, teams = plan(args["groups"], args["queueing"], args.get("provisioning", False))
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        self.flavors = found
        """Each training group's flavor (plain)."""
        self.queues = list(teams) or [DEFAULT_QUEUE]
        self.topology = QueueTopology(args["queueing"].get("topology", QueueTopology.PREFERRED))
        values = {
            "controllerManager": {"nodeSelector": SYSTEM_LABEL},
            "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(
                manager_config(pods_ready_timeout(args["queueing"])), sort_keys=False)},
        }
        namespace = helm.namespace(f"{name}-namespace", self, args["provider"], NAMESPACE, waits_for(opts))
        self.release = helm.release(f"{name}-chart", self, args["provider"], versions.KUEUE_CHART, NAMESPACE, values,
                                    [*waits_for(opts), namespace], local_chart=args.get("chart_folder"))
        self.manifests = render(found, teams, args["namespace"])
        """The flavors, topology, checks and queues (plain)."""
        for manifest in self.manifests:
            k8s.apiextensions.CustomResource(
                f"{name}-{manifest['kind'].lower()}-{manifest['metadata']['name']}",
                api_version=manifest["apiVersion"], kind=manifest["kind"], metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=pulumi.ResourceOptions(parent=self, provider=args["provider"], depends_on=[self.release]),
            )
        self.register_outputs({})

    def submission(self, group: str, queue: str | None = None) -> "QueueSubmission":
        """How a job on `group` is submitted: to `queue` (default: the first), placed as the stack's topology says."""
        flavor = next(flavor for flavor in self.flavors if flavor.name == group)
        placement = self.topology.value if flavor.topology and self.topology != QueueTopology.OFF else None
        return QueueSubmission(queue or self.queues[0], placement)


@dataclass(frozen=True)
class QueueSubmission:
    """What a job carries to be queued: its LocalQueue's label and, where topology applies, its pods' request."""

    queue: str
    placement: str | None
    """required or preferred: all pods under one CLOSEST_LAYER network node; None: anywhere in the group."""

    def labels(self) -> dict[str, str]:
        return {QUEUE_LABEL: self.queue}

    def pod_annotations(self) -> dict[str, str]:
        return {TOPOLOGY_ANNOTATIONS[self.placement]: CLOSEST_LAYER} if self.placement else {}
