"""Kueue itself (sigs.k8s.io/kueue v0.17.0, tests/cluster/engines/kueue) admitting the stack's jobs on KWOK nodes of
its groups: its webhook suspends a queued job, its scheduler starts the whole job or none of it.

The stack's own training job (a PyTorchJob, a TrainJob or an Indexed Job, per operator) takes its place in the queue
first; the jobs that compete with it are Indexed Jobs the test submits to the same LocalQueue, each pod asking for a
whole node's share of the quota, so the quota counts nodes. A job ends as a real one would: its pods' containers exit
0 (tests/cluster/stages/pod-exit.yaml). With `autoscaler: none` the groups' nodes all exist; the Cluster Autoscaler's
side (ProvisioningRequests answered by scaling) has no engine here (tests/cluster/engines/cluster-autoscaler).
"""

from collections.abc import Callable
from typing import Any

import pytest

from eks_ddp.infra.addons import kueue
from eks_ddp.infra.aws.cluster import GROUP_LABEL
from eks_ddp.infra.facts.network_topology import NETWORK_LAYERS
from eks_ddp.infra.platform import reachable_groups
from eks_ddp.tools import stack_file
from eks_ddp.stack.config import parse
from eks_ddp.engine_models.base import quantity
from tests.cluster import karpenter, objects
from tests.cluster.conftest import OnEngines, training, wait_for

QUEUED = {"eks-ddp:queueing": "kueue", "eks-ddp:autoscaler": "none"}
WORKERS = 6
FIXED_SIX = {**QUEUED, "eks-ddp:nodeGroups[1].desiredSize": str(WORKERS)}
"""The dev stack queued on its workers group held at six nodes, all there (nothing scales a group without an
autoscaler: the queue counts its desiredSize nodes)."""
OPERATOR_JOBS = {"v1": "PyTorchJob", "v2": "TrainJob", "none": "Job"}
NAMESPACE, GROUP = "training", "workers"


def _gang(name: str, pods: int, millicores: int) -> dict[str, Any]:
    """An Indexed Job of `pods` pods on the workers group, each asking for `millicores`, in the stack's queue; its pods
    run until the test gives them an exit code (objects.running_on)."""
    return objects.running_on({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {kueue.QUEUE_LABEL: kueue.DEFAULT_QUEUE}},
        "spec": {
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "nodeSelector": {GROUP_LABEL: GROUP},
                "containers": [{"name": "work", "image": objects.STAND_IN_IMAGE,
                                "resources": {"requests": {"cpu": f"{millicores}m"}}}],
            }},
        },
    })


def _workload(on: OnEngines, kind: str, name: str) -> dict[str, Any] | None:
    """The Workload Kueue made for the job (its owner reference), or None yet."""
    for workload in on.kubectl.items("workloads", "-n", NAMESPACE):
        if any(ref["kind"] == kind and ref["name"] == name for ref in workload["metadata"].get("ownerReferences", [])):
            return workload
    return None


def _condition(workload: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    conditions = ((workload or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), {})


def _admitted(on: OnEngines, kind: str, name: str) -> bool:
    return _condition(_workload(on, kind, name), "Admitted").get("status") == "True"


def _pods(on: OnEngines, job: str) -> list[dict[str, Any]]:
    return on.kubectl.items("pods", "-n", NAMESPACE, "-l", f"batch.kubernetes.io/job-name={job}")


def _stack_job(on: OnEngines, kind: str) -> str:
    """The name of the stack's training job among the objects of `kind` it sends (an Indexed Job beside the data and
    evaluation Jobs)."""
    (name,) = [r.sent["metadata"]["name"] for r in on.deployment.registrations
               if r.type.startswith("kubernetes:") and r.sent.get("kind") == kind
               and (kind != "Job" or r.sent["spec"].get("completionMode") == "Indexed")]
    return name


def _node_share(on: OnEngines) -> int:
    """The workers flavor's cpu quota per node of the WORKERS it counts: the stack gives the queue its groups' whole
    reach."""
    (queue,) = on.kubectl.items("clusterqueues")
    flavor = next(f for g in queue["spec"]["resourceGroups"] for f in g["flavors"] if f["name"] == GROUP)
    cpu = next(r["nominalQuota"] for r in flavor["resources"] if r["name"] == "cpu")
    return int(quantity(cpu) * 1000) // WORKERS


def _running(on: OnEngines, job: str) -> list[dict[str, Any]]:
    return [p for p in _pods(on, job) if p["status"].get("phase") == "Running"]


@pytest.mark.parametrize("operator", sorted(OPERATOR_JOBS))
def test_a_job_waits_in_its_queue_whole_until_the_one_before_it_ends(
    cluster: Callable[..., OnEngines], operator: str
) -> None:
    on = cluster("dev", {**FIXED_SIX, "eks-ddp:trainingOperator": operator})
    kind = OPERATOR_JOBS[operator]
    stack_job = _stack_job(on, kind)
    wait_for(f"Kueue to admit the stack's {kind}", lambda: _admitted(on, kind, stack_job))
    # Out of the way, so the quota the test counts is all free: its pods end by themselves under some operators (KWOK
    # completes a Job's pods at once; a make test run at 619688d saw the Indexed Job's quota freed mid-test).
    on.kubectl.run("delete", kind.lower(), stack_job, "-n", NAMESPACE, "--wait=true")
    wait_for(f"the stack's {kind} to give its quota back", lambda: _workload(on, kind, stack_job) is None)
    nodes = [n for n in on.kubectl.items("nodes") if n["metadata"]["labels"].get(GROUP_LABEL) == GROUP]
    assert len(nodes) == WORKERS, "a group without an autoscaler has its desiredSize nodes"
    _waits_whole(on, free=WORKERS - 1)  # one node's quota left: less than the second job's two


def _end(on: OnEngines, job: str) -> None:
    """The job's work done: each of its pods' containers exits 0."""
    for pod in _pods(on, job):
        on.kubectl.api.request("PATCH", f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}",
                               {"metadata": {"annotations": {objects.EXIT_CODE: "0"}}}, "application/merge-patch+json")


def _waits_whole(on: OnEngines, free: int) -> None:
    """A first job of `free` pods admitted and running; a second of 2 and one larger than the quota both wait whole,
    with no pod; once the first ends, the second runs and the larger never starts."""
    share = _node_share(on)
    on.kubectl.apply([_gang("first", free, share)])
    wait_for("the first job admitted and all its pods running",
             lambda: _admitted(on, "Job", "first") and len(_running(on, "first")) == free)
    on.kubectl.apply([_gang("second", 2, share), _gang("too-large", WORKERS + 1, share)])
    newcomers = ("second", "too-large")
    try:
        wait_for("Kueue to keep both newcomers waiting for quota", lambda: all(
            _condition(_workload(on, "Job", job), "QuotaReserved").get("status") == "False" for job in newcomers), 150)
    except AssertionError as error:  # what Kueue made of each, for the report (a make test run at 1472913 timed out)
        seen = {job: (_workload(on, "Job", job) or {}).get("status") for job in newcomers}
        raise AssertionError(f"{error}; their workloads' status: {seen}") from None
    for job in ("second", "too-large"):
        found = on.kubectl.get("job", job, "-n", NAMESPACE)
        assert found["spec"].get("suspend") is True, f"{job}: not suspended by Kueue's webhook"
        assert _pods(on, job) == [], f"{job}: pods made while it waits"
    _end(on, "first")
    wait_for("the second job admitted once the first ended, all its pods running", lambda: _admitted(
        on, "Job", "second") and len(_running(on, "second")) == 2, 120)
    too_large = _workload(on, "Job", "too-large")
    assert not _admitted(on, "Job", "too-large") and _pods(on, "too-large") == []
    assert "insufficient quota" in _condition(too_large, "QuotaReserved").get("message", ""), too_large


def test_an_admitted_job_that_cannot_get_all_its_pods_ready_gives_its_quota_back_and_is_requeued(
    cluster: Callable[..., OnEngines],
) -> None:
    """Gang admission's other half: a pod outside Kueue holds one of the six nodes, so the job of six nodes' quota that
    Kueue admits gets five pods running and one Pending; at the stack's timeout Kueue evicts the job whole and
    requeues it, and a job of the five free nodes is admitted in its place."""
    timeout_s = 20
    on = cluster("dev", {**FIXED_SIX, "eks-ddp:queuePodsReadyTimeout": f"{timeout_s}s"})
    stack_job = _stack_job(on, "PyTorchJob")
    wait_for("Kueue to admit the stack's job", lambda: _admitted(on, "PyTorchJob", stack_job))
    on.kubectl.run("delete", "pytorchjob", stack_job, "-n", NAMESPACE, "--wait=true")
    wait_for("the stack's job to give its quota back", lambda: _workload(on, "PyTorchJob", stack_job) is None)
    share = _node_share(on)
    outsider = _gang("outsider", 1, share)
    outsider["metadata"] = {"name": "outsider", "namespace": "default"}  # no queue: Kueue leaves it alone
    on.kubectl.apply([outsider])
    wait_for("the pod outside Kueue running on one node", lambda: [
        p for p in on.kubectl.items("pods", "-n", "default", "-l", "batch.kubernetes.io/job-name=outsider")
        if p["status"].get("phase") == "Running"])
    on.kubectl.apply([_gang("whole", WORKERS, share)])
    wait_for("the whole job admitted, five pods running and one Pending", lambda: _admitted(on, "Job", "whole")
             and len(_running(on, "whole")) == WORKERS - 1 and len(_pods(on, "whole")) == WORKERS)
    evicted = wait_for("Kueue to evict the job at its timeout", lambda: _condition(
        _workload(on, "Job", "whole"), "Evicted") if _condition(_workload(on, "Job", "whole"), "Evicted").get(
            "status") == "True" else None, timeout_s * 4)
    assert evicted["reason"] == "PodsReadyTimeout", evicted
    workload = _workload(on, "Job", "whole") or {}
    assert workload["status"].get("requeueState", {}).get("count") == 1, workload["status"]
    wait_for("the evicted job suspended with no pod left", lambda: on.kubectl.get(
        "job", "whole", "-n", NAMESPACE)["spec"].get("suspend") is True and not _running(on, "whole"))
    on.kubectl.apply([_gang("in-its-place", WORKERS - 1, share)])
    wait_for("a job of the five free nodes admitted in its place, all its pods running", lambda: _admitted(
        on, "Job", "in-its-place") and len(_running(on, "in-its-place")) == WORKERS - 1)


@pytest.mark.parametrize("operator", sorted(OPERATOR_JOBS))
def test_under_karpenter_an_admitted_job_gets_its_nodes_and_a_waiting_job_none(
    cluster: Callable[..., OnEngines], operator: str
) -> None:
    """Kueue admits by quota alone (the pool's maxSize nodes' reach, no topology: kueue#5133), then Karpenter itself
    (its kwok provider) launches nodes for the admitted job's Pending pods; a job kept waiting has no pod, so Karpenter
    launches nothing for it."""
    on = cluster("dev", {"eks-ddp:queueing": "kueue", "eks-ddp:autoscaler": "karpenter", "eks-ddp:monitoring": "none",
                         "eks-ddp:trainingOperator": operator})
    kind = OPERATOR_JOBS[operator]
    stack_job = _stack_job(on, kind)
    wait_for(f"Kueue to admit the stack's {kind}", lambda: _admitted(on, kind, stack_job))

    def launched() -> set[str]:
        return {n["metadata"]["name"] for n in on.kubectl.items("nodes", "-l", karpenter.NODEPOOL_LABEL)}

    def on_launched_nodes(pods: list[dict[str, Any]], phases: tuple[str, ...] = ("Running",)) -> bool:
        return bool(pods) and all(p["status"].get("phase") in phases for p in pods) and {
            p["spec"].get("nodeName") for p in pods} <= launched()

    # An Indexed Job's pods may have ended already (KWOK completes them at once).
    wait_for(f"the stack's {kind} run on nodes Karpenter launched for it (the pool had none)",
             lambda: on_launched_nodes(training(on.kubectl.items("pods", "-n", NAMESPACE)), ("Running", "Succeeded")),
             90)
    on.kubectl.run("delete", kind.lower(), stack_job, "-n", NAMESPACE, "--wait=true")
    wait_for(f"the stack's {kind} to give its quota back", lambda: _workload(on, kind, stack_job) is None)
    _waits_whole(on, free=WORKERS - 1)
    assert on_launched_nodes(_pods(on, "second"))
    # The whole quota is within the pool's limits: a job asking for all of it gets a node for every pod.
    _end(on, "second")
    on.kubectl.apply([_gang("all-of-it", WORKERS, _node_share(on))])
    wait_for(f"a job of the whole quota admitted, its {WORKERS} pods running on launched nodes", lambda: _admitted(
        on, "Job", "all-of-it") and len(_pods(on, "all-of-it")) == WORKERS and on_launched_nodes(_pods(
            on, "all-of-it")), 120)


def test_the_gpu_stack_under_the_cluster_autoscaler_admits_its_job_beside_an_active_provisioning_check(
    cluster: Callable[..., OnEngines],
) -> None:
    """The stack as `make cluster-up STACK=gpu CONFIG=eks-ddp:queueing=kueue` runs it: Kueue finds the
    ProvisioningRequest API the stack installed before it and activates the check of the groups that scale; the job
    on the fixed p4de group needs none and is admitted. The autoscaler's answer to a request is not tested: it has no
    engine here."""
    on = cluster("gpu", {"eks-ddp:queueing": "kueue"})
    job = _stack_job(on, "PyTorchJob")
    wait_for("Kueue to admit the stack's job", lambda: _admitted(on, "PyTorchJob", job))
    check = on.kubectl.get("admissioncheck", kueue.PROVISIONING)
    assert _condition(check, "Active").get("status") == "True", check.get("status")
    (queue,) = on.kubectl.items("clusterqueues")
    assert _condition(queue, "Active").get("status") == "True", queue.get("status")


PLACED = {**QUEUED, "eks-ddp:fabricCheck": "off"}
"""The gpu stack queued on its p4de nodes, which the harness puts each under a layer-3 network node of its own, the two
under one layer-2 node (tests/cluster/nodes.py network_layers); its fabric checks off, which would be placed alike."""


def _placed(cluster: Callable[..., OnEngines], topology: str, operator: str) -> tuple[OnEngines, str, str]:
    """The gpu stack queued with `topology` under `operator`: the cluster, its job's kind and name."""
    on = cluster("gpu", {**PLACED, "eks-ddp:queueTopology": topology, "eks-ddp:trainingOperator": operator})
    kind = OPERATOR_JOBS[operator]
    return on, kind, _stack_job(on, kind)


@pytest.mark.parametrize("operator", sorted(OPERATOR_JOBS))
def test_a_job_that_requires_one_layer_3_node_never_starts_across_two(
    cluster: Callable[..., OnEngines], operator: str
) -> None:
    on, kind, job = _placed(cluster, "required", operator)
    seen: list[str] = []

    def refused_for_its_topology() -> bool:
        message = _condition(_workload(on, kind, job), "QuotaReserved").get("message", "")
        if message and "topology" not in message and message not in seen:
            # Kueue's first try can come before its TAS cache holds the gpu flavor, created a moment before (v0.17.0
            # pkg/scheduler/flavorassigner/tas_flavorassigner.go: "possible in race-situation"; seen under load as
            # "Flavor "g4dn" does not support TopologyAwareScheduling, flavor p4d doesn't match node affinity"), and
            # an inadmissible workload waits for the next event that may admit it: a label change on a node of a
            # topology flavor is one (pkg/controller/tas/resource_flavor.go), as a node joining would be.
            seen.append(message)
            node = next(n["metadata"]["name"] for n in on.kubectl.items("nodes")
                        if n["metadata"]["labels"].get(GROUP_LABEL) == "gpu")
            on.kubectl.run("label", "node", node, f"eks-ddp.test/retry={len(seen)}", "--overwrite")
        return "topology" in message

    try:
        wait_for("Kueue to refuse the job its topology", refused_for_its_topology)
    except AssertionError as error:  # what Kueue made of it, for the report (a CI run at d47954b timed out, none)
        raise AssertionError(f"{error}; its workload's status: {(_workload(on, kind, job) or {}).get('status')}; "
                             f"earlier refusals: {seen}") from None
    assert not _admitted(on, kind, job)
    assert training(on.kubectl.items("pods", "-n", NAMESPACE)) == []


@pytest.mark.parametrize("operator", sorted(OPERATOR_JOBS))
def test_a_job_that_prefers_one_layer_3_node_is_placed_under_one_layer_2_node(
    cluster: Callable[..., OnEngines], operator: str
) -> None:
    on, kind, job = _placed(cluster, "preferred", operator)
    wait_for("Kueue to admit the job", lambda: _admitted(on, kind, job))
    workload = _workload(on, kind, job) or {}
    assignments = workload["status"]["admission"]["podSetAssignments"]
    assert all(a.get("topologyAssignment") for a in assignments), assignments  # placed by Kueue's TAS
    count = sum(podset["count"] for podset in workload["spec"]["podSets"])
    assert count == 2, workload["spec"]["podSets"]  # the gpu stack's two workers

    def placed() -> list[dict[str, Any]] | None:
        pods = [p for p in training(on.kubectl.items("pods", "-n", NAMESPACE)) if p["spec"].get("nodeName")]
        return pods if len(pods) == count else None

    pods = wait_for(f"all {count} of the job's pods on their nodes", placed)
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in on.kubectl.items("nodes")}
    middle = {nodes[p["spec"]["nodeName"]][NETWORK_LAYERS[1]] for p in pods}
    assert len(middle) == 1, [(p["metadata"]["name"], p["spec"]["nodeName"]) for p in pods]


def _teams(share: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The queues the stack renders for two teams on the dev stack's workers: vision guaranteed 3 nodes' share, speech
    2, the cohort the last one (kueue.plan and kueue.render, as `eks-ddp:queueQuotas` makes them)."""
    values, region = stack_file.load("dev", stack_file.ROOT, dict(FIXED_SIX))
    platform = parse(values, region).platform
    nominal = {"vision": 3, "speech": 2}
    quotas = {team: {GROUP: {"cpu": f"{count * share}m"}} for team, count in nominal.items()}
    found, teams = kueue.plan(reachable_groups(platform), {"quotas": quotas}, False)
    return kueue.render(found, teams, NAMESPACE), nominal


def test_a_team_borrows_from_its_cohort_and_gives_it_back_when_the_lender_needs_it(
    cluster: Callable[..., OnEngines],
) -> None:
    on = cluster("dev", FIXED_SIX)
    stack_job = _stack_job(on, "PyTorchJob")
    wait_for("Kueue to admit the stack's job", lambda: _admitted(on, "PyTorchJob", stack_job))
    on.kubectl.run("delete", "pytorchjob", stack_job, "-n", NAMESPACE, "--wait=true")
    share = _node_share(on)
    queues, nominal = _teams(share)
    on.kubectl.apply(queues)
    borrower = _gang("vision-big", 5, share)  # 3 of its own, 2 borrowed (speech's unused and the cohort's)
    borrower["metadata"]["labels"][kueue.QUEUE_LABEL] = "vision"
    on.kubectl.apply([borrower])
    wait_for("vision's job admitted on borrowed quota, its pods running", lambda: _admitted(
        on, "Job", "vision-big") and len(_running(on, "vision-big")) == 5)
    lender = _gang("speech-job", nominal["speech"], share)
    lender["metadata"]["labels"][kueue.QUEUE_LABEL] = "speech"
    on.kubectl.apply([lender])
    wait_for("speech's job admitted on its own quota, taken back from vision", lambda: _admitted(
        on, "Job", "speech-job"), 120)
    evicted = _condition(_workload(on, "Job", "vision-big"), "Evicted")
    assert evicted.get("status") == "True" and evicted.get("reason") == "Preempted", evicted
    assert not _admitted(on, "Job", "vision-big")
