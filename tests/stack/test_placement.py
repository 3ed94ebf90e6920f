"""The cluster rehearsal finds the defects issue 21 measured, each reproduced here, and places every pod of the
shipped stacks under every autoscaler and operator (stack.rehearsal runs those variants; test_rehearsal runs it)."""

import copy
import csv
from dataclasses import replace
from datetime import date
from typing import Any

import pytest

from eks_ddp.infra.facts import catalogue
from eks_ddp.infra.facts.allocatable import efa_hugepages_mib
from eks_ddp.stack import stack_file
from eks_ddp.stack.cluster.placement import placed, rehearse_placement
from eks_ddp.stack.config import parse
from eks_ddp.stack.engine_rules import Deployment
from eks_ddp.stack.mocked import run_under_mocks
from eks_ddp.stack.mocking import Registration
from eks_ddp.workloads.target import DAEMON_SETS_MIB
from tests.upstream import REFERENCE


def _deployment(stack: str, **overrides: Any) -> Deployment:
    values, region = stack_file.load(stack)
    registrations = run_under_mocks(parse({**values, **overrides}, region), stack=stack)
    return Deployment(registrations, region or "", "arn:aws:iam::123456789012:role/deployer", date(2026, 11, 23))


def _edited(deployment: Deployment, kind: str, name_part: str, edit: Any) -> Deployment:
    registrations: list[Registration] = []
    for registration in deployment.registrations:
        if registration.inputs.get("kind") == kind and name_part in registration.name:
            registration = replace(registration, inputs=copy.deepcopy(registration.inputs))
            edit(registration)
        registrations.append(registration)
    return replace(deployment, registrations=registrations)


@pytest.mark.parametrize("stack", ["dev", "gpu"])
def test_every_pod_of_the_stack_is_placed(stack: str) -> None:
    assert rehearse_placement(_deployment(stack)) == []
    assert rehearse_placement(_deployment(stack, autoscaler="karpenter")) == []


def test_a_pod_sized_for_managed_nodes_never_gets_a_karpenter_node() -> None:
    """The dev training pod asked 114 GiB (116,736 MiB), nodeadm's room; Karpenter's c7g.16xlarge offers 113,259 less
    its EFA huge pages."""
    deployment = _deployment("dev", autoscaler="karpenter")

    def managed_sized(job: Registration) -> None:
        for replica in job.inputs["spec"]["pytorchReplicaSpecs"].values():
            resources = replica["template"]["spec"]["containers"][0]["resources"]
            resources["requests"]["memory"] = resources["limits"]["memory"] = "114Gi"

    findings = rehearse_placement(_edited(deployment, "PyTorchJob", "train", managed_sized))
    assert findings and all(f.resource == "PyTorchJob eks-ddp-train-job" for f in findings)
    assert "116736 MiB" in findings[0].problem and "MiB short" in findings[0].problem


@pytest.mark.parametrize(
    ("memory", "mib"),
    [("1061Gi", "1086464"), ("1051Gi", "1076224")],
    ids=["without-huge-pages", "with-5128-huge-pages"],
)
def test_a_pod_sized_without_the_nodes_own_huge_pages_never_fits_a_p4de_node(memory: str, mib: str) -> None:
    """The gpu training pod asked 1,061 GiB (nodeadm's room), then 1,051 GiB (less the EKS user guide's 5,128 pages);
    a p4de's EFA software holds 10,561 pages (96 vCPUs x 110 + 1: 21,122 MiB, as AWS's published p4de node shows),
    which kubelet takes out of allocatable memory (nodestatus MachineInfo): 1,066,947 MiB are left."""
    deployment = _deployment("gpu")

    def sized(job: Registration) -> None:
        for replica in job.inputs["spec"]["pytorchReplicaSpecs"].values():
            resources = replica["template"]["spec"]["containers"][0]["resources"]
            resources["requests"]["memory"] = resources["limits"]["memory"] = memory

    assert rehearse_placement(deployment) == []
    findings = rehearse_placement(_edited(deployment, "PyTorchJob", "train", sized))
    assert findings and all(f.resource == "PyTorchJob eks-ddp-train-job" for f in findings)
    assert f"{mib} MiB" in findings[0].problem and "MiB short" in findings[0].problem


def test_a_side_step_on_a_full_gpu_group_keeps_a_training_pod_pending() -> None:
    """Evaluation took the training group's selector and tolerations: beside a p4de training pod (94 CPUs) the
    node has 1.69 CPUs, the daemon sets' share, and the reservation's group holds 2 nodes."""
    deployment = _deployment("gpu")
    train = next(r for r in deployment.registrations if r.inputs.get("kind") == "PyTorchJob")
    training_pod = train.inputs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]

    def on_training_nodes(job: Registration) -> None:
        pod = job.inputs["spec"]["template"]["spec"]
        pod["nodeSelector"], pod["tolerations"] = training_pod["nodeSelector"], training_pod["tolerations"]
        pod["containers"][0]["resources"]["requests"]["cpu"] = "2"

    findings = rehearse_placement(_edited(deployment, "Job", "evaluate", on_training_nodes))
    training = [f for f in findings if f.resource == "PyTorchJob eks-ddp-train-job"]
    assert training and "CPU short" in training[0].problem and "at 2 of 2 nodes" in training[0].problem


def test_checks_that_do_not_gate_compete_with_training_for_a_full_group() -> None:
    """Created with the training job (not awaited), the fabric check and NCCL workers hold both p4de nodes."""
    deployment = _deployment("gpu")

    def submitted(check: Registration) -> None:
        check.inputs["metadata"]["annotations"] = {"pulumi.com/skipAwait": "true"}

    findings = rehearse_placement(_edited(_edited(deployment, "Job", "efa-check", submitted), "MPIJob", "", submitted))
    assert {f.resource for f in findings} >= {"PyTorchJob eks-ddp-train-job"}
    assert any("vpc.amazonaws.com/efa" in f.problem for f in findings)


def test_add_ons_without_a_selector_land_on_a_big_training_node_and_training_still_fits() -> None:
    """kube-scheduler scores the node with the larger free share first: on dev, CoreDNS and the training operator
    go to the c7g.16xlarge worker beside the training pod, which the training pod's size leaves room for."""
    cluster = placed(_deployment("dev"))
    workers = [n for n in cluster.nodes if "workers" in n.name]
    beside_training = {p.name.rsplit("-", 1)[0] for n in workers for p in n.pods if not p.daemon and not p.training}
    assert {"coredns", "training-operator"} <= beside_training
    assert cluster.findings == [] and sum(p.training for n in workers for p in n.pods) == 2


def test_training_pods_land_only_on_their_groups_nodes() -> None:
    """own-code's system nodes are the training group's type (m5.large) and untainted: a pod that selected only the
    architecture took a system node beside the add-ons (own-code's master did)."""
    cluster = placed(_deployment("own-code"))
    hosts = {node.name for node in cluster.nodes for pod in node.pods if pod.training}
    assert hosts and all("-cpu-nodes-" in host for host in hosts), hosts
    assert sum(pod.training for node in cluster.nodes for pod in node.pods) == 2


def test_the_cpu_tutorial_trains_on_its_two_m5_large_nodes_beside_every_add_on() -> None:
    """Seed 004 has exactly two m5.large nodes: the system group, which the job trains on. Both replicas, the
    operators, Prometheus and the evaluation Job fit them, one training pod per node, with nothing pending."""
    cluster = placed(_deployment("cpu"))
    assert [node.name for node in cluster.nodes] == ["eks-ddp-cluster-system-1", "eks-ddp-cluster-system-2"]
    assert [sum(pod.training for pod in node.pods) for node in cluster.nodes] == [1, 1] and cluster.findings == []
    assert any(pod.name.startswith("training-operator") for node in cluster.nodes for pod in node.pods)


# What a real node of each training type offers pods, as published, in MiB: Karpenter v1.14.1's reference table
# (AL2023; upstream/reference/instance-types.tsv) and, where AWS published a node, the lower of the two
# (aws-samples/awsome-distributed-training 7217859 3.test_cases/megatron/nemo1.0/EKS/README.md: p4de.24xlarge,
# 1,146,004,920 Ki); EFA's huge pages, which neither counts as memory pods cannot have, taken out. A pod must leave
# NODE_MARGIN of it beside the daemon sets' budget: nodes of another AMI or kernel offer a few per cent less or more.
AWS_PUBLISHED_ALLOCATABLE_MIB = {"p4de.24xlarge": 1146004920 // 1024}
NODE_MARGIN = 0.10


def _published_allocatable_mib(instance_type: str, efa: bool) -> int:
    with (REFERENCE / "instance-types.tsv").open() as table:
        rows = csv.DictReader((line.removeprefix("# ") for line in table), delimiter="\t")
        karpenter = next(int(r["karpenter_allocatable_memory"].removesuffix("Mi")) for r in rows
                         if r["instance_type"] == instance_type)
    published = min(karpenter, AWS_PUBLISHED_ALLOCATABLE_MIB.get(instance_type, karpenter))
    instance = catalogue.INSTANCE_TYPES[instance_type]
    return published - (efa_hugepages_mib(instance) if efa else 0)


def _over_published_nodes(deployment: Deployment) -> list[str]:
    """Each training pod whose memory request, beside the daemon sets' budget, takes more than all but NODE_MARGIN of
    what a published node of its type offers; fails when no training pod was placed."""
    cluster = placed(deployment)
    training = [(node, pod) for node in cluster.nodes for pod in node.pods if pod.training]
    assert training, cluster.findings
    over = []
    for node, pod in training:
        room = int(_published_allocatable_mib(node.source.instance_type, node.source.efa_devices > 0) * (1 - NODE_MARGIN))
        if pod.requests()["memory"] + DAEMON_SETS_MIB > room:
            over.append(f"{pod.owner} {pod.name} on {node.name}: {pod.requests()['memory']:.0f} MiB, room {room}")
    return over


@pytest.mark.parametrize("stack", sorted(stack_file.stacks()))
def test_every_training_pod_fits_the_published_node_of_its_type_with_a_margin(stack: str) -> None:
    """Training pods asked nearly all of a node's estimated memory (c7g.16xlarge 104 GiB, p4de 1,051 GiB): a node a MiB
    smaller than the estimate keeps them Pending. They ask what the trainer needs, far inside every published node."""
    assert _over_published_nodes(_deployment(stack)) == []


def test_a_training_pod_one_mib_over_the_margin_fails_the_check() -> None:
    """The check above can fail: the dev pod asking 1 MiB more than a published c7g.16xlarge leaves it."""
    room = int(_published_allocatable_mib("c7g.16xlarge", True) * (1 - NODE_MARGIN)) - DAEMON_SETS_MIB

    def asks(mib: int) -> Any:
        def edit(job: Registration) -> None:
            for replica in job.inputs["spec"]["pytorchReplicaSpecs"].values():
                replica["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] = f"{mib}Mi"
        return edit

    deployment = _deployment("dev")
    assert _over_published_nodes(_edited(deployment, "PyTorchJob", "train", asks(room))) == []
    over = _over_published_nodes(_edited(deployment, "PyTorchJob", "train", asks(room + 1)))
    assert len(over) == 2 and all(f"{room + 1} MiB" in line for line in over)
