"""Every shipped stack's training pods fit a real node of their type as AWS and Karpenter publish it, with a margin:
nodes of another AMI or kernel offer a few per cent less or more than our estimate (infra.facts.allocatable)."""

import copy
import csv
from datetime import date

import pytest

from eks_ddp.infra.facts import catalogue
from eks_ddp.infra.facts.allocatable import efa_hugepages_mib
from eks_ddp.tools import stack_file
from eks_ddp.engine_models.base import Deployment, admits, node_sources, quantity, training_templates
from eks_ddp.infra.facts.node_room import DAEMON_SETS_MIB
from tests.upstream import REFERENCE
from tests.stack.registered import registered

# What a real node of each training type offers pods, as published, in MiB: Karpenter v1.14.1's reference table
# (AL2023; upstream/reference/instance-types.tsv) and, where AWS published a node, the lower of the two
# (aws-samples/awsome-distributed-training 7217859 3.test_cases/megatron/nemo1.0/EKS/README.md: p4de.24xlarge,
# 1,146,004,920 Ki); EFA's huge pages, which neither counts as memory pods cannot have, taken out. A pod must leave
# NODE_MARGIN of it beside the daemon sets' budget.
AWS_PUBLISHED_ALLOCATABLE_MIB = {"p4de.24xlarge": 1146004920 // 1024}
NODE_MARGIN = 0.10


def _deployment(stack: str) -> Deployment:
    values, region = stack_file.load(stack)
    registrations = registered(values, region, stack)
    return Deployment(registrations, region or "", "arn:aws:iam::123456789012:role/deployer", date(2026, 11, 23))


def _published_allocatable_mib(instance_type: str, efa: bool) -> int:
    with (REFERENCE / "instance-types.tsv").open() as table:
        rows = csv.DictReader((line.removeprefix("# ") for line in table), delimiter="\t")
        karpenter = next(int(r["karpenter_allocatable_memory"].removesuffix("Mi")) for r in rows
                         if r["instance_type"] == instance_type)
    published = min(karpenter, AWS_PUBLISHED_ALLOCATABLE_MIB.get(instance_type, karpenter))
    instance = catalogue.INSTANCE_TYPES[instance_type]
    return published - (efa_hugepages_mib(instance) if efa else 0)


def _over_published_nodes(deployment: Deployment) -> list[str]:
    """Each training pod template whose memory request, beside the daemon sets' budget, takes more than all but
    NODE_MARGIN of what a published node of its group's type offers; fails when the stack has no training pod."""
    templates, sources, over = list(training_templates(deployment)), node_sources(deployment), []
    assert templates, "no training pod"
    for template, _ in templates:
        spec = template.get("spec", {})
        source = next(s for s in sources if admits(s, spec))
        memory = sum(quantity(c["resources"]["requests"]["memory"]) for c in spec["containers"]) / 2**20
        room = int(_published_allocatable_mib(source.instance_type, source.efa_devices > 0) * (1 - NODE_MARGIN))
        if memory + DAEMON_SETS_MIB > room:
            over.append(f"{source.registration.name}: {memory:.0f} MiB, room {room}")
    return over


@pytest.mark.parametrize("stack", sorted(stack_file.stacks()))
def test_every_training_pod_fits_the_published_node_of_its_type_with_a_margin(stack: str) -> None:
    """Training pods asked nearly all of a node's estimated memory (c7g.16xlarge 104 GiB, p4de 1,051 GiB): a node a MiB
    smaller than the estimate keeps them Pending. They ask what the trainer needs, far inside every published node."""
    assert _over_published_nodes(_deployment(stack)) == []


def test_a_training_pod_one_mib_over_the_margin_fails_the_check() -> None:
    """The check above can fail: the dev pod asking 1 MiB more than a published c7g.16xlarge leaves it."""
    room = int(_published_allocatable_mib("c7g.16xlarge", True) * (1 - NODE_MARGIN)) - DAEMON_SETS_MIB
    deployment = _deployment("dev")

    def asking(mib: int) -> Deployment:
        registrations = copy.deepcopy(deployment.registrations)
        for job in (r for r in registrations if r.inputs.get("kind") == "PyTorchJob"):
            for replica in job.inputs["spec"]["pytorchReplicaSpecs"].values():
                replica["template"]["spec"]["containers"][0]["resources"]["requests"]["memory"] = f"{mib}Mi"
        return Deployment(registrations, deployment.region, deployment.deployer_arn, deployment.today)

    assert _over_published_nodes(asking(room)) == []
    over = _over_published_nodes(asking(room + 1))
    assert over and all(f"{room + 1} MiB" in line for line in over)
