"""What `pulumi up` gives the program becomes what the stack file parses to, and the naming rule's edges.

`from_pulumi` runs here under the SDK's mocks with the strings the CLI passes (JSON for maps and lists), as the
offline tools run `__main__.py`; the real CLI runs it in tests/cluster/test_every_stack_on_pulumi.py.
"""

from pathlib import Path
from typing import NotRequired, TypedDict

import pulumi
import pytest

from eks_ddp.infra.addons.training_operator import OperatorKind
from eks_ddp.infra.aws.iam import RoleAccess
from eks_ddp.infra.platform import AutoscalerKind, MonitoringKind
from eks_ddp.stack.config import ConfigError, StackConfig, from_pulumi, parse
from eks_ddp.stack.keys import Section
from eks_ddp.stack.project_config import ROOT, StackFileError
from eks_ddp.tools import stack_file
from eks_ddp.tools.mocking import run_offline
from eks_ddp.tools.pulumi_program import Program
from tests.stack.test_config_keys import EVERY_KEY, _refusal, _stack
from tests.stack.test_new_key import _project_declaring


def _read_by_the_program(stack: str, override: dict[str, str] | None = None) -> StackConfig:
    """The settings the program reads from the config the CLI passes for `stack` (with `override` set after the
    CLI's own checks, as an older CLI that does not refuse undeclared keys would pass it)."""
    program, seen = Program.at(ROOT), []
    config = {**program.config(stack), **(override or {})}
    run_offline(lambda: seen.append(from_pulumi(ROOT)), program.region(stack), "eks-ddp", stack, config)
    (settings,) = seen
    return settings


@pytest.mark.parametrize("stack", ["dev", "gpu", "own-code"])
def test_the_program_reads_what_the_cli_passes_as_the_stack_file_says(stack: str) -> None:
    values, region = stack_file.load(stack)
    assert _read_by_the_program(stack) == parse(values, region)


def test_a_whole_number_is_read_as_the_cli_takes_it() -> None:
    """The CLI takes `+7` for an integer key (strconv.Atoi); the SDK's get_int reads it, JSON would not."""
    settings = _read_by_the_program("dev", {"eks-ddp:checkpointExpiryDays": "+7"})
    assert settings.platform.get("checkpoint_expiry_days") == 7


def test_a_key_the_project_does_not_declare_is_refused_naming_the_stack() -> None:
    with pytest.raises(StackFileError, match="^Stack 'dev' sets eks-ddp:imageUri, which Pulumi.yaml does not declare"):
        _read_by_the_program("dev", {"eks-ddp:imageUri": "x"})


def test_a_choice_reaches_the_platform_as_its_member() -> None:
    platform = parse(EVERY_KEY, "us-west-2").platform
    chosen = [platform.get("autoscaler"), platform.get("monitoring"), platform.get("service_account_roles"),
              platform.get("training_operator")]
    assert [type(choice) for choice in chosen] == [AutoscalerKind, MonitoringKind, RoleAccess, OperatorKind]


def test_a_component_names_another_setting_by_its_key() -> None:
    subnets_alone = _stack(vpc={"availabilityZones": ["us-west-2a", "us-west-2b"],
                                "existingPrivateSubnetIds": {"us-west-2a": "subnet-1", "us-west-2b": "subnet-2"}})
    assert _refusal(subnets_alone) == (
        "eks-ddp:vpc.existingVpcId: None is not allowed; existing subnet ids need vpc.existingVpcId"
    )


class _Measured(TypedDict):
    size: NotRequired[float]


def test_a_field_no_stack_type_fits_is_refused_when_its_section_is_declared() -> None:
    with pytest.raises(TypeError, match="^no stack type for a field of type <class 'float'>$"):
        Section((_Measured,)).fields()
    with pytest.raises(ConfigError):
        parse({"nodeGroups": [{"name": "system", "instanceType": 1}]}, "us-west-2")


def test_a_job_names_its_group() -> None:
    values = _stack(job={"epochs": 1})
    assert _refusal(values) == (
        "eks-ddp:job.nodeGroup: None is not allowed; use one of the node groups: system, trainers"
    )


def test_the_program_reads_the_keys_its_own_pulumi_yaml_declares(tmp_path: Path) -> None:
    """A copy of the program (as `make deploy-local` runs it) declares its keys in its own Pulumi.yaml."""
    project = _project_declaring(tmp_path, "eks-ddp:privateEndpointOnly", {"type": "boolean", "default": False})
    program, seen = Program.at(ROOT), []
    config = {**program.config("dev"), "eks-ddp:privateEndpointOnly": "true"}
    run_offline(lambda: seen.append(from_pulumi(project)), program.region("dev"), "eks-ddp", "dev", config)
    assert seen[0].platform.get("private_endpoint_only") is True


def test_against_aws_a_placeholder_is_refused_naming_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside the mocks (as `pulumi up` runs the program) the gpu stack file's example VPC id is refused."""
    program = Program.at(ROOT)
    pulumi.runtime.settings.reset_options()  # no monitor: not under the mocks
    pulumi.runtime.set_all_config({"aws:region": program.region("gpu"), **program.config("gpu")})
    monkeypatch.setattr(pulumi.runtime.settings.SETTINGS, "stack", "gpu")
    monkeypatch.setattr(pulumi.runtime.settings.SETTINGS, "project", "eks-ddp")
    with pytest.raises(ConfigError, match=r"^eks-ddp:vpc\.existingVpcId: 'vpc-0123456789abcdef0' is not allowed"):
        from_pulumi(ROOT)
