"""Karpenter scales the stack's NodePools from zero on the local cluster: the real provisioner (its kwok provider,
tests/cluster/karpenter.py) sees the training pods Pending on a pool that has no node, launches nodes of the pool's
instance type with its labels and taints, and the real scheduler runs the pods there; side Jobs stay off them."""

import math
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from eks_ddp.infra.facts import catalogue
from eks_ddp.tools import stack_file
from eks_ddp.tools.cost import training_nodes
from eks_ddp.engine_models.base import Deployment, NodeSource, node_offer, quantity
from tests.cluster import karpenter, local_cluster
from tests.cluster.conftest import training, wait_for
from tests.cluster.shared_plane import SharedPlane

KARPENTER = {"eks-ddp:autoscaler": "karpenter", "eks-ddp:monitoring": "none"}
SCALE_UP_S = 30.0
"""How long a Pending pod may wait for its Karpenter node here (measured: 1 to 3 s from pod to Running node)."""
SIDE_STEP = "eks-ddp/step"
LIMITED = ("exceed limits for nodepool", "limits have been exhausted for nodepool")
"""Karpenter's reasons not to launch a node for a pod because of its NodePool's limits, in the FailedScheduling event
it sends for the pod (sigs.k8s.io/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/scheduler.go)."""
CLAIMS_AFTER_EVENTS_S = 2.0
"""A round of Karpenter's provisioner sends its pods' events, then creates its NodeClaims (provisioner.go Schedule,
then CreateNodeClaims): how long a NodeClaim of the round that refused the last pods may still take to appear."""
"""The label of the side Jobs (data, evaluation): work that must never take a training node's room."""


# ---- Without a cluster ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def deployments() -> dict[str, Deployment]:
    return {stack: local_cluster.deployment_of(stack, KARPENTER) for stack in ("dev", "gpu")}


def test_node_pools_point_at_a_kwok_node_class_of_their_ec2_node_class_name(deployments: dict[str, Deployment]) -> None:
    for deployment in deployments.values():
        sent = [r.sent for r in deployment.of_type(karpenter.EC2_NODE_CLASS) + deployment.of_type(karpenter.NODE_POOL)]
        objects = karpenter.for_kwok(sent)
        pools = [o for o in objects if o["kind"] == "NodePool"]
        classes = {o["metadata"]["name"] for o in objects if o["kind"] == karpenter.KWOK_KIND}
        assert pools
        assert all(p["spec"]["template"]["spec"]["nodeClassRef"]["kind"] == karpenter.KWOK_KIND for p in pools)
        assert {p["spec"]["template"]["spec"]["nodeClassRef"]["name"] for p in pools} <= classes
        assert classes == {o["metadata"]["name"] for o in objects if o["kind"] == "EC2NodeClass"}, "EC2NodeClasses kept"
        assert karpenter.for_kwok(objects) == objects, "a second pass changes nothing"


def _pools(deployment: Deployment) -> list[NodeSource]:
    return karpenter._pools(deployment)


def test_every_stack_file_but_one_onto_an_existing_cluster_is_tried_with_karpenter() -> None:
    assert set(karpenter.stacks()) == set(stack_file.stacks(stack_file.ROOT)) - {"eksctl"}


@pytest.mark.parametrize("stack", karpenter.stacks())
def test_the_instance_type_file_gives_our_allocatable_and_the_instances_vcpus(stack: str) -> None:
    """Every shipped stack's pools: the vCPUs as CPU (so limits count whole instances, as on EC2, scheduler.go
    subtractMax), and memory that leaves node_offer's once the kwok provider takes its 10Mi and the huge pages."""
    deployment = local_cluster.deployment_of(stack, KARPENTER)
    files = {t["name"]: t for t in karpenter.instance_types(deployment)}
    for source in _pools(deployment):
        facts = catalogue.lookup(source.instance_type)
        assert facts is not None
        resources, offer = files[source.instance_type]["resources"], node_offer(source)
        assert quantity(resources["cpu"]) == facts.vcpus
        hugepages = quantity(resources.get("hugepages-2Mi", 0))
        kwok_reserved = karpenter.KWOK_RESERVED_MIB * 2**20
        assert quantity(resources["memory"]) - kwok_reserved - hugepages == offer["memory"] * 2**20
        assert hugepages == offer.get("hugepages-2Mi", 0)
        for name in ("pods", "vpc.amazonaws.com/efa", "nvidia.com/gpu", "aws.amazon.com/neuron"):
            assert quantity(resources.get(name, 0)) == offer.get(name, 0), (source.registration.name, name)


def test_a_stack_with_a_reserved_pool_runs_karpenter_with_the_reserved_capacity_gate_off(
    deployments: dict[str, Deployment],
) -> None:
    assert karpenter.reserved_pools(deployments["gpu"]) == ["eks-ddp-gpu-nodepool"]
    assert not karpenter.reserved_pools(deployments["dev"])
    chart = "ReservedCapacity=true,NodeRepair=false"
    assert karpenter.feature_gates(chart, True) == "ReservedCapacity=false,NodeRepair=false"
    assert karpenter.feature_gates(chart, False) == chart


# ---- On the engines -------------------------------------------------------------------------------------------------


class OnKarpenter:
    """One stack deployed on a local cluster with Karpenter running."""

    def __init__(self, stack: str, deployment: Deployment, cluster: local_cluster.LocalCluster) -> None:
        self.stack, self.deployment, self.cluster = stack, deployment, cluster
        self.kubectl = cluster.kubectl

    def pool_of_group(self, group: str) -> NodeSource:
        return next(s for s in _pools(self.deployment) if s.labels.get("eks-ddp/node-group") == group)

    def nodes(self, pool: NodeSource) -> list[dict[str, Any]]:
        return self.kubectl.items("nodes", "-l", f"{karpenter.NODEPOOL_LABEL}={pool.labels[karpenter.NODEPOOL_LABEL]}")


@pytest.fixture(scope="module")
def on_karpenter(engines: dict[str, Path], shared_plane: SharedPlane) -> Iterator[Callable[[str], OnKarpenter]]:
    """`on_karpenter(stack)`: the stack deployed under autoscaler=karpenter on the session's control plane, for as
    long as this module asks for the same stack (another stack resets the plane for it)."""
    current: dict[str, OnKarpenter] = {}

    def get(stack: str) -> OnKarpenter:
        if stack not in current:
            current.clear()
            deployment = local_cluster.deployment_of(stack, KARPENTER)
            steps = local_cluster.steps_of(deployment, engines)
            cluster = shared_plane.take(stack, local_cluster.installed_crds(steps))
            current[stack] = OnKarpenter(stack, deployment, cluster)
            local_cluster.deploy(cluster, deployment, engines, steps)
        return current[stack]

    yield get
    shared_plane.release()


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in pod.get("status", {}).get("conditions") or [] if c["type"] == kind), {})


def _assert_scaled_from_zero(on: OnKarpenter) -> None:
    values = stack_file.load(on.stack, stack_file.ROOT, {})[0]
    group = (values.get("job") or {}).get("nodeGroup") or values["nodeGroups"][0]["name"]
    pool = on.pool_of_group(group)
    replicas = int((values.get("job") or {}).get("replicas", 1))

    # The operator creates the pods a moment after deploy returns: settle only once they exist.
    wait_for(f"{on.stack}: {replicas} training pods", lambda: len(training(on.kubectl.items("pods", "-A"))) >= replicas,
             60)
    pods = local_cluster.settle(on.kubectl)
    trainers = training(pods)
    assert all(p["status"].get("phase") == "Running" for p in trainers), [p["metadata"]["name"] for p in trainers]

    launched = {n["metadata"]["name"]: n for n in on.nodes(pool)}
    assert {p["spec"]["nodeName"] for p in trainers} <= set(launched), "training pods on nodes Karpenter launched"
    waits = {p["metadata"]["name"]: (_time(_condition(p, "PodScheduled")["lastTransitionTime"])
                                     - _time(p["metadata"]["creationTimestamp"])).total_seconds() for p in trainers}
    assert max(waits.values()) <= SCALE_UP_S, f"seconds from Pending to placed: {waits}"

    offer = node_offer(pool)
    facts = catalogue.lookup(pool.instance_type)
    assert facts is not None
    wanted_taints = {(t["key"], str(t.get("value", "")), t["effect"]) for t in pool.taints}
    for node in launched.values():
        labels = node["metadata"]["labels"]
        assert labels[karpenter.INSTANCE_TYPE_LABEL] == pool.instance_type
        assert pool.labels.items() <= labels.items(), "the pool's labels, requirements and nodepool"
        taints = {(t["key"], str(t.get("value", "")), t["effect"]) for t in node["spec"].get("taints") or []}
        assert wanted_taints <= taints
        allocatable = node["status"]["allocatable"]  # Karpenter's, all but CPU the kubelet's already
        assert {k: quantity(allocatable.get(k, 0)) for k in offer if k != "cpu"} == {
            k: v * (2**20 if k == "memory" else 1) for k, v in offer.items() if k != "cpu"}

    def as_the_kubelet_reports() -> bool:
        current = on.nodes(pool)
        return all(quantity(n["status"]["capacity"]["cpu"]) == facts.vcpus
                   and quantity(n["status"]["allocatable"]["cpu"]) * 1000 == offer["cpu"] for n in current)

    wait_for("each Karpenter node reports its instance's capacity and allocatable", as_the_kubelet_reports)
    # Karpenter believes a new node holds vCPUs - 100m (the kwok provider's overhead), the node reports node_offer's:
    # what it launched for must fit both, or the result would depend on the difference.
    claims = on.kubectl.items("nodeclaims", "-l", f"{karpenter.NODEPOOL_LABEL}={pool.labels[karpenter.NODEPOOL_LABEL]}")
    believed = facts.vcpus * 1000 - karpenter.KWOK_RESERVED_MILLICORES
    for claim in claims:
        asked = quantity(claim["spec"]["resources"]["requests"]["cpu"]) * 1000
        assert asked <= min(believed, offer["cpu"]), f"{claim['metadata']['name']} asks {asked:.0f}m"
    name = pool.labels[karpenter.NODEPOOL_LABEL]
    wait_for(f"NodePool {name} counts whole instances",
           lambda: quantity(on.kubectl.get("nodepool", name).get("status", {}).get("resources", {}).get("cpu", 0))
           == facts.vcpus * len(on.nodes(pool)))

    side = [p for p in pods if SIDE_STEP in (p["metadata"].get("labels") or {})]
    assert side, f"{on.stack}: no side Job pod"
    on_training_nodes = [p["metadata"]["name"] for p in side if p["spec"].get("nodeName") in launched]
    assert not on_training_nodes, f"side Jobs on the training nodes: {on_training_nodes}"
    assert {p["status"].get("phase") for p in side} <= {"Running", "Succeeded"}
    # The preview prices the pool at the nodes Karpenter itself launched for the job (stack.cost).
    assert len(on.nodes(pool)) == training_nodes(on.deployment)[pool.registration.urn]


def test_dev_training_pods_pending_on_an_empty_node_pool_get_nodes_from_karpenter(
    on_karpenter: Callable[[str], OnKarpenter],
) -> None:
    _assert_scaled_from_zero(on_karpenter("dev"))


def _spread_pod(name: str, group: str) -> dict[str, Any]:
    """A pod asking for 1 CPU on the group, never beside another of its kind (one node each) nor beside a pod of the
    training namespace. On a training node it would take the room the training pod leaves to the daemon sets, and a
    daemon set's pod arriving late (system-node-critical) preempts it: one make test run at 5ef95e2 lost a bound pod
    that way (5 running at one moment, 4 bound two seconds later)."""
    selector = {"matchLabels": {"eks-ddp.local/test": "spread"}}
    training_pods = {"labelSelector": {}, "namespaces": ["training"], "topologyKey": "kubernetes.io/hostname"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"eks-ddp.local/test": "spread"}},
        "spec": {
            "nodeSelector": {"eks-ddp/node-group": group},
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}, training_pods]}},
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": {"cpu": "1"}}}],
        },
    }


def test_dev_node_pool_cpu_limit_stops_karpenter_at_whole_instances(on_karpenter: Callable[[str], OnKarpenter]) -> None:
    """limits.cpu 384 of c7g.16xlarge (64 vCPUs) is 6 nodes on EC2. Small pods that each need a node of their own
    arrive in two waves, so the second batch counts the nodes that exist by their capacity: with the kwok provider's
    capacity (their pods' requests) Karpenter launched a node for each of the 13 pods (15 in all), with the
    instance's it stops at 6."""
    on = on_karpenter("dev")
    pool = on.pool_of_group("workers")
    facts = catalogue.lookup(pool.instance_type)
    assert facts is not None
    limit = int(quantity(pool.registration.inputs["spec"]["limits"]["cpu"]) // facts.vcpus)

    def training_running() -> bool:
        pods = training(on.kubectl.items("pods", "-n", "training"))
        return len(pods) >= 2 and all(p["status"].get("phase") == "Running" for p in pods)

    wait_for("the training pods on their nodes first", training_running, 60)
    before = len(on.nodes(pool))
    on.kubectl.apply([_spread_pod(f"spread-a-{i}", "workers") for i in range(3)])
    wait_for("the first wave's nodes", lambda: len(on.nodes(pool)) == before + 3, 60)
    on.kubectl.apply([_spread_pod(f"spread-b-{i}", "workers") for i in range(10)])
    wait_for("Karpenter to reach the limit", lambda: len(on.nodes(pool)) >= limit, 60)

    def pending_refused_for_limits() -> list[str]:
        """The pods still pending, once each was refused for the limits and every node launched has its pod bound (a
        first-wave pod waits for its node to be ready, and was refused too while it did)."""
        pods = on.kubectl.items("pods", "-A")
        pending = {p["metadata"]["name"] for p in pods
                   if p["metadata"].get("labels", {}).get("eks-ddp.local/test") == "spread"
                   and p["status"].get("phase") == "Pending"}
        in_use = {p["spec"].get("nodeName") for p in pods}
        events = on.kubectl.items("events", "-n", "default", "--field-selector=reason=FailedScheduling")
        refused = {e["involvedObject"]["name"] for e in events if any(why in e.get("message", "") for why in LIMITED)}
        launched_in_use = all(node["metadata"]["name"] in in_use for node in on.nodes(pool))
        return sorted(pending) if pending and pending <= refused and launched_in_use else []

    pending = wait_for("Karpenter to refuse every pod still pending for the pool's limits", pending_refused_for_limits)
    time.sleep(CLAIMS_AFTER_EVENTS_S)
    claims = on.kubectl.items("nodeclaims", "-l", f"{karpenter.NODEPOOL_LABEL}={pool.labels[karpenter.NODEPOOL_LABEL]}")
    assert len(claims) == len(on.nodes(pool)) == limit
    # Every new node holds one of the pods and the rest wait, refused for the limits; a node that was there before
    # may hold one too where it runs no training pod: limit - before at least. One snapshot, all 13 pods in it.
    spread = on.kubectl.items("pods", "-n", "default", "-l", "eks-ddp.local/test=spread")
    bound = sorted(p["metadata"]["name"] for p in spread if p["spec"].get("nodeName"))
    waiting = sorted(p["metadata"]["name"] for p in spread if not p["spec"].get("nodeName"))
    created = {f"spread-a-{i}" for i in range(3)} | {f"spread-b-{i}" for i in range(10)}
    gone = created - {p["metadata"]["name"] for p in spread}
    # A bound pod a daemon set's late pod preempts (system-node-critical, see _spread_pod) is the scheduler's doing,
    # not Karpenter's: it counts as bound, shown by its event; a pod gone any other way fails with its events.
    events = on.kubectl.items("events", "-n", "default") if gone else []
    preempted = {e["involvedObject"]["name"] for e in events if e.get("reason") == "Preempted"}
    taints = {n["metadata"]["name"]: n["spec"].get("taints") for n in on.nodes(pool)} if gone - preempted else {}
    assert gone <= preempted, "\n".join(
        [f"{e['involvedObject']['name']} {e.get('reason')}: {e.get('message')}" for e in events
         if e["involvedObject"]["name"] in gone] + [f"taints now: {taints}"]
    )
    assert len(bound) + len(gone) >= limit - before and set(waiting) <= set(pending), (bound, gone, waiting, pending)


def test_gpu_training_pods_pending_on_an_empty_node_pool_get_nodes_from_karpenter(
    on_karpenter: Callable[[str], OnKarpenter],
) -> None:
    """The gpu stack's training pool allows reserved capacity only (its capacity block); its gates (the EFA and
    NCCL checks) run on that pool first, so Karpenter launches the nodes before the training objects exist."""
    _assert_scaled_from_zero(on_karpenter("gpu"))
