"""The deploy rehearsal: each rule fails on its defect, the paths the stack files do not take pass, and two runs of a
stack register identical inputs. That every stack file passes every rule on the day it runs is `make rehearse`'s exit
status, which tests/test_docs_code_blocks.py checks as the README writes the command (a Kubernetes version that has
left standard support fails `make test` there); the same rehearsal here again cost 22 CPU-s."""

import copy
import subprocess
import sys
from collections.abc import Callable
from datetime import date
from typing import Any

import pytest

from eks_ddp.tools import rehearsal, stack_file
from eks_ddp.stack.config import parse
from eks_ddp.engine_models import Deployment, check
from eks_ddp.tools.mocking import run_under_mocks
from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN, Registration

DEV, REGION = stack_file.load("dev")
TODAY = date(2026, 11, 22)
# The paths the dev stack does not take: a GPU Capacity Block group (32 EFA cards), Graviton4 EFA
# nodes (missing from the old device plugin chart's list), and the x86 fabric check outside us-east-1.
VARIANT = {
    **DEV,
    "vpc": {"cidr": "10.0.0.0/16", "availabilityZones": ["eu-west-1a", "eu-west-1b"]},
    "nodeGroups": [
        {"name": "system", "instanceType": "m5.large", "desiredSize": 2},
        {
            "name": "gpus",
            "instanceType": "p5e.48xlarge",
            "availabilityZone": "eu-west-1a",
            "maxSize": 2,
            "capacityType": "CAPACITY_BLOCK",
            "capacityReservationId": "cr-0123456789abcdef0",
            "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
        },
        {"name": "workers", "instanceType": "c8g.48xlarge", "availabilityZone": "eu-west-1a", "maxSize": 4},
    ],
    "adminPrincipalArns": [DEPLOYER_ROLE_ARN, "arn:aws:iam::123456789012:role/platform-admin"],
    "job": {**DEV["job"], "nodeGroup": "gpus"},
}


def test_the_paths_the_dev_stack_does_not_take_pass_too() -> None:
    assert rehearsal.rehearse_values(VARIANT, "eu-west-1") == []


def test_two_runs_of_each_stack_register_identical_inputs() -> None:
    for values, region in ((DEV, REGION), (VARIANT, "eu-west-1")):
        config = parse(values, region)
        first, second = run_under_mocks(config), run_under_mocks(config)
        assert len(first) > 50 and rehearsal.differences(first, second) == []


def test_a_value_that_changes_between_runs_is_reported() -> None:
    config = parse(DEV, REGION)
    first, second = run_under_mocks(config), run_under_mocks(config)
    changed = next(r for r in second if r.type == "docker-build:index:Image")
    changed.inputs["tags"] = ["repository:built-at-0930"]
    (line,) = rehearsal.differences(first, second)
    assert line.startswith("idempotence: Image eks-ddp-image-build tags: differs between two runs")


def _named(registrations: list[Registration], name: str) -> dict[str, Any]:
    return next(r for r in registrations if r.name == name).inputs


def _remove_skip_await(runs: list[Registration]) -> None:
    del _named(runs, "eks-ddp-data-job")["metadata"]["annotations"]


def _skip_await_on_a_job(runs: list[Registration]) -> None:
    """The annotation the stack used before: `pulumi up` then never waited for a replaced Job to go."""
    _named(runs, "eks-ddp-data-job")["metadata"]["annotations"] = {"pulumi.com/skipAwait": "true"}


def _bind_immediately(runs: list[Registration]) -> None:
    _named(runs, "eks-ddp-fsx-class")["volumeBindingMode"] = "Immediate"


def _no_root_step_on_the_volume(runs: list[Registration]) -> None:
    pod = _named(runs, "eks-ddp-data-job")["spec"]["template"]["spec"]
    pod["initContainers"] = [c for c in pod["initContainers"] if c["name"] != "volume-permissions"]


def _ttl(runs: list[Registration]) -> None:
    _named(runs, "eks-ddp-train-job")["spec"]["runPolicy"]["ttlSecondsAfterFinished"] = 86400


def _capacity_block_type_on_the_group(runs: list[Registration]) -> None:
    group = _named(runs, "eks-ddp-gpus-nodes")
    group["instanceTypes"] = ["p5e.48xlarge"]
    del _named(runs, "eks-ddp-gpus-template")["instanceType"]


def _sixteen_interfaces_on_p5e(runs: list[Registration]) -> None:
    template = _named(runs, "eks-ddp-gpus-template")
    template["networkInterfaces"] = template["networkInterfaces"][:16]










def _training_operator_with_mpijob_v1(runs: list[Registration]) -> None:
    from eks_ddp.infra.facts import versions

    overlay = versions.TRAINING_OPERATOR_OVERLAY.format(version=versions.TRAINING_OPERATOR_VERSION)
    _named(runs, "eks-ddp-training-operator-manifests")["directory"] = overlay


def _hugepages(runs: list[Registration]) -> None:
    spec = _named(runs, "eks-ddp-train-job")["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    spec["containers"][0]["resources"]["requests"]["hugepages-2Mi"] = "64Gi"  # the 192-vCPU nodes hold 42,242 MiB


def _no_toleration_for_the_gpu_taint(runs: list[Registration]) -> None:
    _named(runs, "eks-ddp-efa-check-job")["spec"]["template"]["spec"]["tolerations"] = []


def _fabric_image_from_us_east_1(runs: list[Registration]) -> None:
    container = _named(runs, "eks-ddp-efa-check-job")["spec"]["template"]["spec"]["containers"][0]
    container["image"] = container["image"].replace("eu-west-1", "us-east-1")


def _efa_plugin_from_the_charts_region(runs: list[Registration]) -> None:
    del _named(runs, "eks-ddp-efa-device-plugin-chart")["values"]["image"]


def _access_entry_for_the_deployer(runs: list[Registration]) -> None:
    _named(runs, "eks-ddp-cluster-admin-0")["principalArn"] = DEPLOYER_ROLE_ARN


def _old_ami_pin(runs: list[Registration]) -> None:
    _named(runs, "eks-ddp-workers-nodes")["releaseVersion"] = "1.35.0-20260401"


def _training_created_with_the_checks(runs: list[Registration]) -> None:
    train = next(r for r in runs if r.name == "eks-ddp-train-job")
    train.dependencies = [urn for urn in train.dependencies if "check" not in urn]


def _efa_check_not_awaited(runs: list[Registration]) -> None:
    _named(runs, "eks-ddp-efa-check-job")["metadata"]["annotations"] = {"pulumi.com/waitFor": "jsonpath={.metadata}"}


def _no_traffic_within_the_namespace(registrations: list[Registration]) -> None:
    registrations[:] = [r for r in registrations if r.name != "eks-ddp-within-namespace"]


def _no_way_to_the_credential_agent(registrations: list[Registration]) -> None:
    registrations[:] = [r for r in registrations if r.name != "eks-ddp-pod-identity-agent"]


def _everything_allowed_in(registrations: list[Registration]) -> None:
    _named(registrations, "eks-ddp-metrics-scrape")["spec"]["ingress"] = [{}]


DEFECTS: list[tuple[Callable[[list[Registration]], None], str]] = [
    (_no_traffic_within_the_namespace, "network-policy: PyTorchJob eks-ddp-train-job spec: rendezvous with the job's"),
    (
        _no_way_to_the_credential_agent,
        "network-policy: PyTorchJob eks-ddp-train-job spec: its EKS Pod Identity credentials from the node's agent is",
    ),
    (_everything_allowed_in, "network-policy: PyTorchJob eks-ddp-train-job spec: a pod of another namespace reaching"),
    (_training_created_with_the_checks, "fabric-gate: PyTorchJob eks-ddp-train-job dependencies: created without"),
    (_efa_check_not_awaited, "fabric-gate: PyTorchJob eks-ddp-train-job dependencies: the Job eks-ddp-efa-check-job"),
    (_remove_skip_await, "awaits: Job eks-ddp-data-job metadata.annotations: pulumi up waits for the Job to complete"),
    (
        _skip_await_on_a_job,
        'awaits: Job eks-ddp-data-job metadata.annotations: pulumi.com/skipAwait: "true" also skips awaiting a Job',
    ),
    (_bind_immediately, "awaits: PersistentVolumeClaim eks-ddp-fsx-claim spec.storageClassName: an Immediate claim"),
    (_no_root_step_on_the_volume, "volume-ownership: Job eks-ddp-data-job initContainers: trainer is the first to use"),
    (_ttl, "ttl: PyTorchJob eks-ddp-train-job spec.runPolicy.ttlSecondsAfterFinished"),
    (
        _capacity_block_type_on_the_group,
        "launch-template: LaunchTemplate eks-ddp-gpus-template instanceType: a Capacity Block",
    ),
    (
        _sixteen_interfaces_on_p5e,
        "efa-interfaces: NodeGroup eks-ddp-gpus-nodes launchTemplate.networkInterfaces: 16 EFA",
    ),
    (
        _training_operator_with_mpijob_v1,
        "crd-owner: ConfigFile eks-ddp-mpi-operator-manifests file: mpijobs.kubeflow.org",
    ),
    (_hugepages, "schedulable: PyTorchJob eks-ddp-train-job resources.requests.hugepages-2Mi"),
    (_no_toleration_for_the_gpu_taint, "schedulable: Job eks-ddp-efa-check-job nodeSelector: no node group matches"),
    (_fabric_image_from_us_east_1, "image-region: Job eks-ddp-efa-check-job containers[fabric-check].image"),
    (
        _efa_plugin_from_the_charts_region,
        "image-region: Release eks-ddp-efa-device-plugin-chart values.image.repository: 602401143452.dkr.ecr.us-west-2",
    ),
    (_access_entry_for_the_deployer, "access-entry: AccessEntry eks-ddp-cluster-admin-0 principalArn"),
    (_old_ami_pin, "efa-ami: NodeGroup eks-ddp-workers-nodes releaseVersion: 1.35.0-20260401 predates 20260505"),
]


@pytest.fixture(scope="module")
def variant_run() -> list[Registration]:
    return run_under_mocks(parse(VARIANT, "eu-west-1"))


@pytest.mark.parametrize(("inject", "expected"), DEFECTS, ids=[inject.__name__.strip("_") for inject, _ in DEFECTS])
def test_each_rule_reports_its_defect(
    variant_run: list[Registration], inject: Callable[[list[Registration]], None], expected: str
) -> None:
    broken = copy.deepcopy(variant_run)
    inject(broken)
    findings = [str(finding) for finding in check(Deployment(broken, "eu-west-1", DEPLOYER_ROLE_ARN, TODAY))]
    assert any(line.startswith(expected) for line in findings), findings


def test_efa_interfaces_are_checked_against_ec2s_data_not_the_catalogue(variant_run: list[Registration]) -> None:
    """A wrong catalogue (p5e with 16 cards, as it once was) builds 16 interfaces and agrees with itself."""
    broken = copy.deepcopy(variant_run)
    _sixteen_interfaces_on_p5e(broken)
    findings = [str(f) for f in check(Deployment(broken, "eu-west-1", DEPLOYER_ROLE_ARN, TODAY, {"p5e.48xlarge": 32}))]
    assert findings == [
        "efa-interfaces: NodeGroup eks-ddp-gpus-nodes launchTemplate.networkInterfaces: 16 EFA interfaces "
        "on p5e.48xlarge, which has 32 network cards"
    ]


def test_a_toleration_without_a_key_tolerates_every_taint(variant_run: list[Registration]) -> None:
    tolerated = copy.deepcopy(variant_run)
    _named(tolerated, "eks-ddp-efa-check-job")["spec"]["template"]["spec"]["tolerations"] = [{"operator": "Exists"}]
    assert check(Deployment(tolerated, "eu-west-1", DEPLOYER_ROLE_ARN, TODAY)) == []


def test_a_version_past_standard_support_is_reported(variant_run: list[Registration]) -> None:
    findings = check(Deployment(variant_run, "eu-west-1", DEPLOYER_ROLE_ARN, date(2027, 3, 28)))
    assert [str(f) for f in findings] == [
        "kubernetes-version: Cluster eks-ddp-cluster-eks version: 1.35 is not in EKS standard support on 2027-03-28 "
        "(1.34 until 2026-12-02, 1.35 until 2027-03-27)"
    ]


def test_the_command_prints_one_line_per_broken_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert rehearsal.main(["--stack", "dev", "--on", "2027-04-01"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "dev: kubernetes-version: Cluster eks-ddp-cluster-eks version: 1.35 is not in EKS standard support on "
        "2027-04-01 (1.34 until 2026-12-02, 1.35 until 2027-03-27)"
    ]  # none and exit 0 on a day every rule holds: the next test's command


def test_each_warning_is_printed_once_with_its_variants_and_each_stack_file_ends_with_its_summary() -> None:
    """dev runs eight times (twice as written, once changed, under five other variants): a warning is one line that
    says where it came up, Karpenter's only under the Karpenter variants; then one summary line per stack file."""
    command = [sys.executable, "-m", "eks_ddp.tools.rehearsal", "--stack", "dev", "--stack", "cpu", "--on", "2026-11-22"]
    done = subprocess.run(command, cwd=stack_file.ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr
    lines = done.stderr.splitlines()
    warnings, summaries = lines[:-2], lines[-2:]
    assert len(set(warnings)) == len(warnings) and all(line.startswith("warning: ") for line in warnings), lines
    (efa,) = [line for line in warnings if "EFA fabric check skipped" in line]
    assert efa.endswith(" [dev: every variant]"), efa
    (karpenter,) = [line for line in warnings if "KarpenterNodePool eks-ddp-workers" in line]
    assert karpenter.endswith(" [dev: autoscaler karpenter only]"), karpenter
    assert [line.split(":")[0] for line in summaries] == ["eks-ddp dev", "eks-ddp cpu"]
    assert all("every rule holds" in line for line in summaries), summaries
