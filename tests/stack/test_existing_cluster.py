"""A cluster made elsewhere as the target: only the cluster half is registered, and what it cannot take is refused
in one line naming the stack key."""

import copy
from datetime import date
from typing import Any

import pulumi
import pytest

from eks_ddp.infra.facts import instance_facts
from eks_ddp.infra.facts.instance_facts import offline
from eks_ddp.tools import cost, stack_file
from eks_ddp.stack.config import ConfigError, parse
from eks_ddp.engine_models import Deployment
from eks_ddp.tools.mocking import RecordingMocks, run_offline
from eks_ddp.stack.program import build
from eks_ddp.tools.rehearsal import variants
from tests.stack.registered import registered

DEV, REGION = stack_file.load("dev")
KUBECONFIG = "/tmp/kubeconfig-of-a-cluster-made-elsewhere"
FSX = "fs-0123456789abcdef0"


def _existing(**changes: Any) -> dict[str, Any]:
    """The dev stack on a cluster given by kubeconfig, with what such a target cannot take turned off."""
    values = {key: value for key, value in copy.deepcopy(DEV).items() if key not in ("vpc", "clusterName")}
    values.update({
        "existingCluster": {"kubeconfig": KUBECONFIG},
        "autoscaler": "none",
        "storage": {"kind": "existing-fsx", "fileSystemId": FSX, "dnsName": f"{FSX}.fsx.us-east-1.amazonaws.com",
                    "mountName": "abcdefgh"},
        "modelBucket": False,
        "nodeHealth": False,
        "image": "registry.example/eks-ddp-trainer:1",
    })
    values.update(changes)
    return {key: value for key, value in values.items() if value is not None}


def test_a_cluster_given_by_kubeconfig_gets_only_kubernetes_objects() -> None:
    registrations = registered(_existing(), REGION)
    types = {r.type for r in registrations}
    assert not {t for t in types if t.startswith("aws:") or t.startswith("eks:")}, types
    assert "kubernetes:kubeflow.org/v1:PyTorchJob" in types
    provider = next(r for r in registrations if r.type == "pulumi:providers:kubernetes")
    assert provider.sent["kubeconfig"]["value"] == KUBECONFIG  # a secret
    groups = {r.name: r.inputs["described"] for r in registrations if r.type == "eksddp:index:ExistingNodeGroup"}
    assert set(groups) == {"eks-ddp-system", "eks-ddp-workers"}
    system, workers = DEV["nodeGroups"]
    assert groups["eks-ddp-system"] == {
        "instanceType": system["instanceType"], "labels": {"eks-ddp/node-group": "system"}, "taints": [],
        "efaDevices": 0, "scalingConfig": {"minSize": 2, "maxSize": 2, "desiredSize": 2},
    }
    assert groups["eks-ddp-workers"]["instanceType"] == workers["instanceType"] == "c7g.16xlarge"
    efa_group = {"eks-ddp/node-group": "workers", "vpc.amazonaws.com/efa.present": "true"}
    assert groups["eks-ddp-workers"]["labels"] == efa_group
    assert groups["eks-ddp-workers"]["efaDevices"] == 1  # c7g.16xlarge: one network card
    assert groups["eks-ddp-workers"]["scalingConfig"] == {"minSize": 1, "maxSize": 6, "desiredSize": 2}


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"autoscaler": "karpenter"}, "eks-ddp:autoscaler: 'karpenter' is not allowed"),
        ({"storage": {"kind": "fsx"}}, "eks-ddp:storage.kind: 'fsx' is not allowed"),
        ({"modelBucket": None}, "eks-ddp:modelBucket: True is not allowed"),
        ({"storage": {"kind": "existing-fsx", "fileSystemId": FSX, "dnsName": f"{FSX}.fsx.us-east-1.amazonaws.com",
                      "mountName": "abcdefgh", "securityGroupId": "sg-0123456789abcdef0"}},
         "eks-ddp:storage.securityGroupId: 'sg-0123456789abcdef0' is not allowed"),
        ({"nodeHealth": None}, "eks-ddp:nodeHealth: True is not allowed"),
        ({"vpc": {"cidr": "10.0.0.0/16"}}, "eks-ddp:vpc: {'cidr': '10.0.0.0/16'} is not allowed"),
        ({"clusterName": "mine"}, "eks-ddp:clusterName: 'mine' is not allowed"),
        ({"image": None}, "eks-ddp:image: None is not allowed"),
        ({"nodeGroups": [*DEV["nodeGroups"][:1], {**DEV["nodeGroups"][1], "capacityReservationId": "cr-0a1b2c3d4e5f67"}]},
         "eks-ddp:nodeGroups[1].capacityReservationId: 'cr-0a1b2c3d4e5f67' is not allowed; it shapes a new node group"),
        ({"existingCluster": {"kubeconfig": KUBECONFIG, "eksClusterName": "x"}}, "eks-ddp:existingCluster: "),
        ({"existingCluster": {"eksClusterName": "x", "context": "c"}}, "eks-ddp:existingCluster.context: 'c'"),
        ({"existingCluster": {"kubeconfg": KUBECONFIG}}, "eks-ddp:existingCluster.kubeconfg: "),
    ],
)
def test_what_an_existing_cluster_cannot_take_is_refused_naming_the_key(changes: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse(_existing(**changes), REGION)
    assert str(refused.value).startswith(key), str(refused.value)


def test_an_eks_cluster_given_by_name_may_have_its_aws_side() -> None:
    values = _existing(existingCluster={"eksClusterName": "made-by-eksctl"}, modelBucket=None, nodeHealth=None)
    registrations = registered(values, REGION)
    types = {r.type for r in registrations}
    assert {"aws:s3/bucket:Bucket", "aws:eks/addon:Addon"} <= types
    assert "aws:eks/cluster:Cluster" not in types and "aws:ec2/vpc:Vpc" not in types
    named = [r for r in registrations if r.type in ("aws:eks/addon:Addon", "aws:eks/podIdentityAssociation:"
                                                    "PodIdentityAssociation")]
    assert named and {r.sent["clusterName"] for r in named} == {"made-by-eksctl"}


def test_the_operators_install_from_local_files_where_no_registry_is_reached() -> None:
    """`eks-ddp:addons` paths: Kubeflow Trainer's chart from a folder (Helm reads no registry, the chart says its
    version), the MPI operator's manifest from a file."""
    chart, manifest = "/srv/charts/kubeflow-trainer", "/srv/mpi-operator.yaml"
    values = _existing(trainingOperator="v2", addons={"kubeflowTrainer": chart, "mpiOperator": manifest},
                       nodeGroups=[{**DEV["nodeGroups"][0], "instanceType": "m5.large"}, {"name": "gpu", "instanceType": "p4d.24xlarge",
                                                            "maxSize": 2, "desiredSize": 2, "efa": True}],
                       job={**DEV["job"], "nodeGroup": "gpu"})
    registrations = registered(values, REGION)
    (release,) = [r for r in registrations if r.name == "eks-ddp-kubeflow-trainer-chart"]
    assert release.sent["chart"] == chart
    assert "version" not in release.sent and "repositoryOpts" not in release.sent
    (mpi,) = [r for r in registrations if r.type == "kubernetes:yaml/v2:ConfigFile" and "mpi-operator" in r.name]
    assert mpi.sent["file"] == manifest


def test_the_eksctl_stack_file_prices_the_groups_it_describes_and_makes_nothing_of_a_cluster() -> None:
    """Pulumi.eksctl.yaml (seed 003's eks-g4dn cluster): its described groups cost what they cost while they run,
    at their desired sizes, priced from the catalogue independently of the estimate's own arithmetic."""
    values, region = stack_file.load("eksctl")
    registrations = registered(values, region)
    made = {r.type for r in registrations}
    assert not made & {"aws:eks/cluster:Cluster", "aws:ec2/vpc:Vpc", "aws:eks/nodeGroup:NodeGroup"}, made
    deployer = "arn:aws:iam::123456789012:role/ci"
    lines = cost.estimate(Deployment(registrations, region or "", deployer, date(2026, 11, 24)))
    priced = {line.item.split(" (")[0]: (line.quantity, line.unit_hourly) for line in lines}
    g4dn, c5 = offline("g4dn.metal").hourly_usd, offline("c5.2xlarge").hourly_usd
    assert g4dn and c5
    assert priced == {"ExistingNodeGroup eks-ddp-gpu": (2, g4dn), "ExistingNodeGroup eks-ddp-system": (1, c5)}
    assert sum(line.hourly for line in lines) == pytest.approx(2 * g4dn + 1 * c5)


def test_the_rehearsal_runs_an_existing_cluster_stack_only_under_what_it_takes() -> None:
    values, _ = stack_file.load("eksctl")
    assert {v["autoscaler"] for v in variants(values)} == {"none"}
    assert {v["trainingOperator"] for v in variants(values)} == {"v1", "v2", "none"}
    dev, _ = stack_file.load("dev")
    assert len(variants(dev)) == 6 and len(variants(stack_file.load("workshop")[0])) == 2


def test_a_cluster_given_by_kubeconfig_asks_aws_nothing_and_leaves_the_next_program_asking_ec2(monkeypatch) -> None:
    """Its program asks no AWS API (an instance type's facts come from the catalogue: infra/facts/instance_facts.py),
    and the switch stays in that program: the next one in the same process asks EC2 again."""
    asked: list[str] = []
    answer = RecordingMocks.call

    def recording(mocks: RecordingMocks, args: pulumi.runtime.MockCallArgs):
        asked.append(args.token)
        return answer(mocks, args)

    def as_main_runs(values: dict[str, Any]):  # __main__.py: parsed in the program, with EC2's facts asked for
        return lambda: build(parse(values, REGION, describe=instance_facts.describe))

    monkeypatch.setattr(RecordingMocks, "call", recording)
    run_offline(as_main_runs(_existing()), REGION or "us-east-1")
    assert not [token for token in asked if token.startswith("aws:")], asked
    run_offline(as_main_runs(DEV), REGION or "us-east-1")
    assert "aws:ec2/getInstanceType:getInstanceType" in asked
