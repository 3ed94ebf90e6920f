"""Dependencies that cannot be forgotten (engine_models/dependencies.py): what Pulumi's Python SDK waits for,
read from its behaviour under the mocks, and the rule over the stacks."""

import asyncio
import copy
import time
from datetime import date
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws
import pytest

from eks_ddp.engine_models import RULES, Deployment
from eks_ddp.engine_models.dependencies import waits_for_what_it_names
from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN, RecordingMocks, RecordingMonitor, Registration, run_offline
from eks_ddp.tools.pulumi_program import Program
from tests.pulumi_harness import Recorded

TODAY = date(2026, 11, 22)


class _Component(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions) -> None:
        super().__init__("test:index:Component", name, {}, opts)
        aws.sqs.Queue(f"{name}-child", opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({})


def test_a_components_depends_on_is_not_among_its_childrens_dependencies(pulumi_mocks: Recorded) -> None:
    """runtime/resource.py prepare_resource: a resource's dependencies are its own depends_on and its inputs'."""

    def program() -> None:
        _Component("component", pulumi.ResourceOptions(depends_on=[aws.sqs.Queue("first")]))

    pulumi_mocks.run(program)
    first = pulumi_mocks.named("first").urn
    assert pulumi_mocks.named("component").dependencies == [first]
    assert pulumi_mocks.named("component-child").dependencies == []


class _SlowMonitor(RecordingMonitor):
    """Answers the registration of `first` late, as the engine does once a resource is created."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.events: list[tuple[str, str]] = []

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        self.events.append(("sent", request.name))
        if request.name == "first":
            time.sleep(0.5)
        response = super().RegisterResource(request)
        self.events.append(("answered", request.name))
        return response


def test_yet_a_child_is_sent_only_once_its_components_dependencies_are_answered() -> None:
    """The same function awaits the parent's URN, which resolves once the parent's registration is answered, which is
    sent once its dependencies are: a first `pulumi up` creates the child after them, though nothing records it."""
    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.settings.reset_options()
    pulumi.runtime.set_all_config({})
    mocks = RecordingMocks()
    monitor = _SlowMonitor(mocks)
    pulumi.runtime.set_mocks(mocks, project="eks-ddp", stack="test", preview=False, monitor=monitor)
    pulumi.runtime.test(lambda: _Component("component", pulumi.ResourceOptions(depends_on=[aws.sqs.Queue("first")])))()
    events = [event for event in monitor.events if event[1] != "test-eks-ddp"]
    assert events.index(("answered", "first")) < events.index(("sent", "component-child"))


@pytest.fixture(scope="module")
def karpenter_dev() -> list[Registration]:
    return Program.at(Path(".")).run("dev", {"eks-ddp:autoscaler": "karpenter"})


def _findings(registrations: list[Registration]) -> list[str]:
    deployment = Deployment(registrations, "us-east-1", DEPLOYER_ROLE_ARN, TODAY)
    return [str(finding) for finding in waits_for_what_it_names(deployment)]


def test_the_rule_is_one_of_the_rehearsals() -> None:
    assert waits_for_what_it_names in RULES


def test_the_dev_stack_under_karpenter_names_only_what_it_waits_for(karpenter_dev: list[Registration]) -> None:
    """The Karpenter node role's access entry named the cluster by its name and waited only for the role."""
    assert _findings(karpenter_dev) == []


def _named(registrations: list[Registration], name: str) -> Registration:
    return next(r for r in registrations if r.name == name)


def test_a_resource_that_names_the_cluster_and_waits_for_nothing_is_reported(
    karpenter_dev: list[Registration],
) -> None:
    broken = copy.deepcopy(karpenter_dev)
    addon = _named(broken, "eks-ddp-cluster-coredns")
    addon.dependencies, addon.property_dependencies = [], {}
    assert _findings(broken) == [
        "dependencies: Addon eks-ddp-cluster-coredns clusterName: names Cluster eks-ddp-cluster-eks ('eks-ddp-dev') "
        "but does not depend on it (nothing makes it wait): take that resource's output, or put the resource in "
        "this one's depends_on"
    ]


def test_waiting_only_through_the_component_is_reported(karpenter_dev: list[Registration]) -> None:
    broken = copy.deepcopy(karpenter_dev)
    addon = _named(broken, "eks-ddp-cluster-vpc-cni")
    _named(broken, "eks-ddp-cluster").dependencies, addon.dependencies = addon.dependencies, []
    (line,) = _findings(broken)
    assert "Addon eks-ddp-cluster-vpc-cni clusterName: names Cluster" in line
    assert "(only its component waits for it)" in line


def test_an_object_in_a_namespace_the_stack_creates_waits_for_it(karpenter_dev: list[Registration]) -> None:
    """Its provider reaches the cluster, not the namespace."""
    broken = copy.deepcopy(karpenter_dev)
    _named(broken, "eks-ddp-default-deny").dependencies = []
    assert _findings(broken) == [
        "dependencies: NetworkPolicy eks-ddp-default-deny metadata.namespace: names Namespace eks-ddp-namespace "
        "('training') but does not depend on it (nothing makes it wait): take that resource's output, or put the "
        "resource in this one's depends_on"
    ]


def test_a_dependency_reached_through_another_counts(karpenter_dev: list[Registration]) -> None:
    """The system node group waits for the network add-ons, which wait for the cluster."""
    group = _named(karpenter_dev, "eks-ddp-cluster-system")
    assert group.sent["clusterName"] == "eks-ddp-dev"
    assert not any(urn.endswith("::eks-ddp-cluster-eks") for urn in group.dependencies)
    assert not [line for line in _findings(karpenter_dev) if "eks-ddp-cluster-system" in line]


def test_the_recorded_inputs_are_what_the_program_sent() -> None:
    """The mocks add outputs (a name, an ARN) to `inputs`; `sent` holds only the program's."""
    (queue,) = run_offline(lambda: aws.sqs.Queue("queue", message_retention_seconds=300))
    assert queue.sent == {"messageRetentionSeconds": 300} and queue.inputs["name"] == "queue"


def test_a_karpenter_node_class_waits_for_its_roles_access_entry(karpenter_dev: list[Registration]) -> None:
    """A node Karpenter launches with the role before the entry exists cannot join the cluster."""
    entry = _named(karpenter_dev, "eks-ddp-karpenter-node-access").urn
    node_class = next(r for r in karpenter_dev if r.type == "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
    assert entry in node_class.property_dependencies["spec"]
