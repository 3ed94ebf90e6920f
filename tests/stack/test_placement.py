"""The cluster rehearsal finds the defects issue 21 measured, each reproduced here, and places every pod of the
shipped stacks under every autoscaler and operator (stack.rehearsal runs those variants; test_rehearsal runs it)."""

import copy
from dataclasses import replace
from datetime import date
from typing import Any

import pytest

from eks_ddp.stack import stack_file
from eks_ddp.stack.cluster.placement import placed, rehearse_placement
from eks_ddp.stack.config import parse
from eks_ddp.stack.engine_rules import Deployment
from eks_ddp.stack.mocked import run_under_mocks
from eks_ddp.stack.mocking import Registration


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
