"""Bad stack configuration names the key, the value and what is allowed."""

import copy
import json
import runpy
import shutil
from pathlib import Path

import pulumi
import pytest

from eks_ddp.tools import stack_file
from eks_ddp.stack.config import ConfigError, parse
from eks_ddp.stack.project_config import PROJECT, StackFileError
from tests.pulumi_harness import Recorded

DEV, REGION = stack_file.load("dev")


def _with(path: str, value: object) -> dict[str, object]:
    values = copy.deepcopy(DEV)
    target: object = values
    parts = path.split(".")
    for part in parts[:-1]:
        target = target[int(part)] if isinstance(target, list) else target[part]  # type: ignore[index]
    last = parts[-1]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value  # type: ignore[index]
    return values


def test_dev_stack_parses() -> None:
    config = parse(DEV, REGION)
    assert config.platform.get("system_node_count") == 2 and [
        g.get("name") for g in config.platform.get("node_groups", [])
    ] == ["workers"]
    assert config.job is not None and config.job.resolved.replicas == 2 and config.job.node_group == "workers"


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "nodeGroups.1.instanceType",
            "c7g.large",
            "eks-ddp:nodeGroups[1].efa: True is not allowed; c7g.large does not support EFA",
        ),
        (
            "nodeGroups.1.instanceType",
            "c7g-16xlarge",
            "eks-ddp:nodeGroups[1].instanceType: 'c7g-16xlarge' is not allowed; give an EC2 instance type",
        ),
        ("nodeGroups.1.minSize", 7, "eks-ddp:nodeGroups[1].minSize: 7 is not allowed"),
        ("nodeGroups.1.desiredSize", 9, "eks-ddp:nodeGroups[1].desiredSize: 9 is not allowed; must lie between"),
        (
            "nodeGroups.1.availabilityZone",
            "us-east-1c",
            "eks-ddp:nodeGroups[1].availabilityZone: 'us-east-1c' is not allowed; use one of eks-ddp:vpc.availabilityZones",
        ),
        ("nodeGroups.1.colour", "blue", "eks-ddp:nodeGroups[1].colour: 'blue' is not allowed; known keys are"),
        (
            "vpc.natGateways",
            "two",
            "eks-ddp:vpc.natGateways: 'two' is not allowed; use one of ['single', 'one_per_zone']",
        ),
        ("nodeGroups.1.taints", [{"key": "training", "effect": "Never"}], "eks-ddp:nodeGroups[1].taints: "),
        ("vpc.cidr", "10.0.0.0/26", "eks-ddp:vpc.cidr: '10.0.0.0/26' is not allowed; the prefix must be /16 to /24"),
        (
            "storage.capacityGiB",
            1000,
            "eks-ddp:storage.capacityGiB: 1000 is not allowed; use 1200, 2400 or a multiple of 2400 GiB",
        ),
        ("storage.kind", "nfs", "eks-ddp:storage.kind: 'nfs' is not allowed; use fsx, existing-fsx, efs, none"),
        ("job.epochs", -1, "eks-ddp:job.epochs: -1 is not allowed; use a whole number >= 1"),
        (
            "job.nodeGroup",
            "gpus",
            "eks-ddp:job.nodeGroup: 'gpus' is not allowed; use one of the node groups: system, workers",
        ),
        ("job.replicas", 7, "eks-ddp:job.replicas: 7 is not allowed; node group workers holds at most 6 pods"),
        ("job.name", "MNIST_DDP", "eks-ddp:job.name: 'MNIST_DDP' is not allowed; must be a DNS-1035 label"),
        ("job.name", "a" * 60, "must be at most 48 characters"),
        ("job.dataset", "imagenet", "eks-ddp:job.dataset: 'imagenet' is not allowed"),
        ("kubernetesVersions", "1.33", "eks-ddp:kubernetesVersions: '1.33' is not allowed; known keys are"),
        (
            "nodeGroups.0.instanceType",
            "m5.large",
            "eks-ddp:nodeGroups[0].instanceType: 'm5.large' is not allowed; the "
            "job's data preparation and evaluation run on the system nodes in its arm64 image",
        ),
    ],
)
def test_bad_configuration_names_the_key(path: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse(_with(path, value), REGION)
    assert message in str(raised.value)


def test_missing_region_is_named() -> None:
    with pytest.raises(ConfigError, match="aws:region: None is not allowed"):
        parse(DEV, None)


def test_every_key_pulumi_yaml_declares_is_shown_reaching_its_argument() -> None:
    """The program reads the keys Pulumi.yaml declares (stack.sections.top_level); each is in the stack whose every
    key tests/stack/test_config_keys.py follows to its argument, so a declared key nothing reads fails there."""
    from eks_ddp.stack.project_config import declarations
    from tests.stack.test_config_keys import EVERY_KEY

    assert set(declarations()) == {*EVERY_KEY, "existingCluster"}  # exclusive with vpc: test_existing_cluster.py


def test_every_key_pulumi_yaml_declares_has_a_default_so_no_stack_file_must_set_it() -> None:
    """The CLI refuses a stack that leaves out a declared key without a default, a null one included ("validating
    stack config: Stack 'dev' is missing configuration values ...", found by `make deploy-local`, the real CLI):
    every key of ours is optional."""
    from eks_ddp.stack.project_config import declarations

    assert not [key for key, spec in declarations().items() if spec.get("default") is None]


def _scratch_stack(tmp_path: Path, lines: str) -> tuple[dict[str, object], str | None]:
    shutil.copy(stack_file.ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "Pulumi.scratch.yaml").write_text(f"config:\n  aws:region: eu-west-1\n{lines}")
    return stack_file.load("scratch", tmp_path)


def test_values_the_cli_accepts_reach_the_program_as_the_sdk_reads_them(tmp_path: Path) -> None:
    """The CLI lets a typed key be a string ("false", "7"); Config.get_bool / get_int parse it."""
    values, region = _scratch_stack(tmp_path, "  eks-ddp:ncclCheck: 'false'\n  eks-ddp:checkpointExpiryDays: '7'\n")
    assert region == "eu-west-1" and values["ncclCheck"] is False and values["checkpointExpiryDays"] == 7
    assert values["trainingOperator"] == "v1"  # a project default


def test_the_program_refuses_a_key_pulumi_yaml_does_not_declare(pulumi_mocks: Recorded) -> None:
    values, region = stack_file.load("dev")
    config = {
        f"{PROJECT}:{key}": value if isinstance(value, str) else json.dumps(value) for key, value in values.items()
    }
    pulumi.runtime.set_all_config({**config, "eks-ddp:storgae": '{"kind": "efs"}', "aws:region": region or ""})
    with pytest.raises(
        StackFileError, match=r"sets eks-ddp:storgae, which Pulumi.yaml does not declare \(did you mean storage\?\)"
    ):
        runpy.run_path(str(stack_file.ROOT / "__main__.py"))
    assert pulumi_mocks.monitor.registrations == []


def test_keys_the_language_host_passes_in_the_environment_are_checked_too(
    pulumi_mocks: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real `pulumi up` hands the program its config in PULUMI_CONFIG, not in the runtime's map."""
    values, region = stack_file.load("dev")
    config = {
        f"{PROJECT}:{key}": value if isinstance(value, str) else json.dumps(value) for key, value in values.items()
    }
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({**config, "eks-ddp:jobs": "{}", "aws:region": region}))
    with pytest.raises(
        StackFileError, match=r"sets eks-ddp:jobs, which Pulumi.yaml does not declare \(did you mean job\?\)"
    ):
        runpy.run_path(str(stack_file.ROOT / "__main__.py"))


def test_taints_may_use_the_kubernetes_spelling() -> None:
    config = parse(_with("nodeGroups.1.taints", [{"key": "training", "value": "true", "effect": "NoSchedule"}]), REGION)
    (group,) = config.platform.get("node_groups", [])
    assert [dict(taint) for taint in group.get("taints", [])] == [
        {"key": "training", "value": "true", "effect": "NoSchedule"}
    ]


def test_stack_files_are_read_with_the_clis_yaml_rules(tmp_path: Path) -> None:
    """gopkg.in/yaml.v3 reads `off` and `yes` as strings and only true/false as booleans (PyYAML reads False)."""
    values, _ = _scratch_stack(tmp_path, "  eks-ddp:fabricCheck: off\n  eks-ddp:trainingNamespace: 2026-01-01\n")
    assert values["fabricCheck"] == "off" and values["trainingNamespace"] == "2026-01-01"
    with pytest.raises(StackFileError, match="eks-ddp:ncclCheck' must be of type 'boolean'"):
        _scratch_stack(tmp_path, "  eks-ddp:ncclCheck: yes\n")


def test_a_key_declared_as_an_object_takes_a_map_as_the_cli_does(tmp_path: Path) -> None:
    """project.go ValidateConfigValue: a key of `type: object` takes a map (the offline check refused every map)."""
    quotas = "  eks-ddp:queueQuotas:\n    vision:\n      workers:\n        cpu: '64'\n"
    values, _ = _scratch_stack(tmp_path, quotas)
    assert values["queueQuotas"] == {"vision": {"workers": {"cpu": "64"}}}
    with pytest.raises(StackFileError, match="eks-ddp:queueQuotas' must be of type 'object'"):
        _scratch_stack(tmp_path, "  eks-ddp:queueQuotas: vision\n")


def test_a_local_zone_of_the_region_is_a_zone_of_it() -> None:
    values, _ = stack_file.load("dev")
    values = {**values, "vpc": {"cidr": "10.0.0.0/16", "availabilityZones": ["us-east-1a", "us-east-1-bos-1a"]}}
    assert parse(values, "us-east-1").region == "us-east-1"
