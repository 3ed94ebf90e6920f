"""The queues' rules before anything is registered: quotas from the groups' reach, per-team quotas checked against it,
topology only where Kueue can place by it. What Kueue does with them is tests/cluster/test_queues_on_engines.py's."""

from typing import Any

import pytest

from eks_ddp.infra.addons import kueue
from eks_ddp.infra.aws.efa_node_group import NodeGroupShape
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import catalogue
from eks_ddp.infra.facts.allocatable import NodeLauncher
from eks_ddp.infra.facts.node_room import DAEMON_SETS_MIB, daemon_sets_millicores, node_allocatable
from eks_ddp.infra.platform import reachable_groups
from eks_ddp.stack.config import ConfigError, parse
from eks_ddp.tools.stack_file import ROOT, load


def _describe(name: str) -> catalogue.InstanceType:
    found = catalogue.lookup(name)
    assert found is not None
    return found


def _group(name: str, instance_type: str, minimum: int, maximum: int,
           launcher: NodeLauncher = NodeLauncher.MANAGED_NODE_GROUP) -> NodeGroupShape:
    shape: NodeGroupShape = {"name": name, "instance_type": instance_type, "availability_zone": "us-east-1a",
                             "min_size": minimum, "max_size": maximum,
                             "launcher": launcher}
    return shape


GPU = _group("gpu", "p5.48xlarge", 2, 2)
SCALED_GPU = _group("gpu", "p5.48xlarge", 0, 4)
CPU = _group("workers", "c7g.16xlarge", 0, 6)


def _plan(groups: list[NodeGroupShape], provisioning: bool = False, **queueing: Any) -> tuple[Any, Any]:
    return kueue.plan(groups, queueing, provisioning, _describe)  # type: ignore[arg-type]


def test_a_groups_reach_is_its_most_nodes_room_for_workloads() -> None:
    (flavor,), _ = _plan([GPU])
    p5 = _describe("p5.48xlarge")
    node = node_allocatable(p5, NodeLauncher.MANAGED_NODE_GROUP, p5.network_cards)
    assert flavor.reach == {
        "cpu": 2 * (node.millicores - daemon_sets_millicores(p5)),
        "memory": 2 * (node.memory_mib - DAEMON_SETS_MIB),
        "nvidia.com/gpu": 2 * 8,
        "vpc.amazonaws.com/efa": 2 * 32,
    }


@pytest.mark.parametrize(("group", "provisioning", "placed", "provisioned"), [
    (GPU, False, True, False),  # fixed size: its nodes exist before anything is admitted
    (SCALED_GPU, True, True, True),  # scaled by the Cluster Autoscaler: placed once it provisioned them
    (SCALED_GPU, False, False, False),  # scaled by a pod-driven autoscaler without the check: Kueue sees no node
    ({**SCALED_GPU, "launcher": NodeLauncher.KARPENTER}, False, False, False),  # kueue#5133
    (_group("workers", "c7g.16xlarge", 2, 2), False, False, False),  # EC2 gives c7g no network topology
])
def test_topology_applies_where_ec2_gives_one_and_kueue_sees_the_nodes(
    group: NodeGroupShape, provisioning: bool, placed: bool, provisioned: bool
) -> None:
    (flavor,), _ = _plan([group], provisioning)
    assert (flavor.topology, flavor.provisioned) == (placed, provisioned)


@pytest.mark.parametrize(("group", "why"), [
    (CPU, "EC2 gives c7g.16xlarge (workers) no network topology"),
    ({**SCALED_GPU, "launcher": NodeLauncher.KARPENTER}, "kubernetes-sigs/kueue#5133"),
])
def test_required_topology_is_refused_where_it_cannot_hold(group: NodeGroupShape, why: str) -> None:
    with pytest.raises(InvalidArgument, match="queueing.topology='required'") as error:
        _plan([group], topology=kueue.QueueTopology.REQUIRED)
    assert why in str(error.value)


def test_team_quotas_are_read_in_the_flavors_units_and_the_rest_is_the_cohorts() -> None:
    found, teams = _plan([GPU], quotas={"vision": {"gpu": {"nvidia.com/gpu": 8, "cpu": "96", "memory": "1Ti"}},
                                        "speech": {"gpu": {"nvidia.com/gpu": "4", "cpu": "500m"}}})
    assert teams == {"vision": {"gpu": {"nvidia.com/gpu": 8, "cpu": 96_000, "memory": 1024 * 1024}},
                     "speech": {"gpu": {"nvidia.com/gpu": 4, "cpu": 500}}}
    objects = {(o["kind"], o["metadata"]["name"]): o for o in kueue.render(found, teams, "training")}
    cohort = objects[("Cohort", kueue.COHORT)]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert {r["name"]: r["nominalQuota"] for r in cohort}["nvidia.com/gpu"] == "4"  # 16 - 8 - 4
    for team in ("vision", "speech"):
        assert objects[("ClusterQueue", team)]["spec"]["cohortName"] == kueue.COHORT
        assert objects[("LocalQueue", team)]["spec"] == {"clusterQueue": team}


@pytest.mark.parametrize(("quotas", "message"), [
    ({"vision": {"gpu": {"nvidia.com/gpu": 17}}}, "at most what gpu's nodes can offer (its maxSize nodes, or desiredSize without an autoscaler), 16"),
    ({"vision": {"gpu": {"nvidia.com/gpu": 9}}, "speech": {"gpu": {"nvidia.com/gpu": 8}}}, "autoscaler), 16 (9 given to the teams before it)"),
    ({"vision": {"p4d": {"cpu": "8"}}}, "name a training group: gpu"),
    ({"vision": {"gpu": {"aws.amazon.com/neuron": 1}}}, "the group's nodes offer cpu, memory, nvidia.com/gpu"),
    ({"vision": {"gpu": {"cpu": "8 cores"}}}, "give a quantity such as '64' or '500m'"),
    ({"vision": {"gpu": {"nvidia.com/gpu": "1.5"}}}, "give a quantity such as 8"),
    ({"Vision": {"gpu": {"cpu": "8"}}}, "lower case"),
    ({"vision": ["gpu"]}, "give a map of node groups"),
])
def test_quotas_the_groups_cannot_hold_are_refused(quotas: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match="queueing.quotas") as error:
        _plan([GPU], quotas=quotas)
    assert message in str(error.value)


def test_without_teams_one_queue_gets_every_groups_reach_and_jobs_its_label() -> None:
    found, teams = _plan([GPU, CPU], provisioning=True)
    objects = kueue.render(found, teams, "training")
    (queue,) = [o for o in objects if o["kind"] == "ClusterQueue"]
    assert queue["metadata"]["name"] == kueue.DEFAULT_QUEUE and "cohortName" not in queue["spec"]
    quotas = {f["name"]: {r["name"]: r["nominalQuota"] for r in f["resources"]}
              for f in queue["spec"]["resourceGroups"][0]["flavors"]}
    assert quotas["workers"]["nvidia.com/gpu"] == "0" and quotas["gpu"]["nvidia.com/gpu"] == "16"
    checks = queue["spec"]["admissionChecksStrategy"]["admissionChecks"]
    assert checks == [{"name": kueue.PROVISIONING, "onFlavors": ["workers"]}]  # the fixed gpu group needs none
    assert queue["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "training"}}


def _dev(**extra: Any) -> dict[str, Any]:
    values = load("dev", ROOT, {})[0]
    return {**values, **extra}


def test_the_stack_file_refuses_queue_keys_without_kueue_and_names_them_in_its_words() -> None:
    with pytest.raises(ConfigError, match="eks-ddp:queueQuotas: .*add eks-ddp:queueing kueue"):
        parse(_dev(queueQuotas={"vision": {"workers": {"cpu": "8"}}}), "us-east-1")
    with pytest.raises(ConfigError, match=r"eks-ddp:queueQuotas.vision.workers.cpu: '9999000m' .* at most"):
        parse(_dev(queueing="kueue", queueQuotas={"vision": {"workers": {"cpu": "9999"}}}), "us-east-1")
    with pytest.raises(ConfigError, match="eks-ddp:queueTopology: 'required' .* no network topology"):
        parse(_dev(queueing="kueue", queueTopology="required"), "us-east-1")


@pytest.mark.parametrize(("stack", "autoscaler", "sizes"), [
    ("dev", "none", (2, 2)),  # nothing scales it: the desiredSize nodes are all it has
    ("dev", "cluster-autoscaler", (1, 6)),
    ("eksctl", "none", (1, 6)),  # an existing cluster's group scales as described, by that cluster's own autoscaler
])
def test_a_queue_counts_the_nodes_a_group_can_have(stack: str, autoscaler: str, sizes: tuple[int, int]) -> None:
    values = load(stack, ROOT, {"eks-ddp:autoscaler": autoscaler, "eks-ddp:queueing": "kueue"})[0]
    values["nodeGroups"][1] |= {"minSize": 1, "maxSize": 6, "desiredSize": 2}
    training_group = reachable_groups(parse(values, "us-east-1").platform)[1]
    assert (training_group.get("min_size"), training_group.get("max_size")) == sizes


def test_the_gang_timeout_is_the_stacks_or_ten_minutes_and_anything_but_a_duration_is_refused() -> None:
    assert kueue.manager_config(kueue.pods_ready_timeout({}))["waitForPodsReady"]["timeout"] == "10m"
    assert kueue.pods_ready_timeout({"pods_ready_timeout": "1h30m"}) == "1h30m"
    for bad in ("10", "0s", "ten minutes", "-5m", "5d"):
        with pytest.raises(ConfigError, match=f"eks-ddp:queuePodsReadyTimeout: '{bad}' .*duration above zero"):
            parse(_dev(queueing="kueue", queuePodsReadyTimeout=bad), "us-east-1")
    with pytest.raises(ConfigError, match="eks-ddp:queuePodsReadyTimeout: '20m' .*add eks-ddp:queueing kueue"):
        parse(_dev(queuePodsReadyTimeout="20m"), "us-east-1")
