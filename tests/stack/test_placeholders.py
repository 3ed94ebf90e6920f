"""The shipped stack files' placeholder ids: marked by the preview, refused against AWS, kept under the mocks."""

from pathlib import Path

import pytest

from eks_ddp.stack import placeholders
from eks_ddp.tools import preview, stack_file
from eks_ddp.stack.config import ConfigError
from tests.pulumi_harness import Recorded


def test_every_placeholder_of_the_stack_files_is_found_with_its_key_as_written() -> None:
    keys = {
        stack: [key for key, _, _ in placeholders.found(stack_file.load(stack)[0], "eks-ddp:")]
        for stack in ("gpu", "gpu-existing", "trainium", "own-code", "dev", "cpu", "workshop")
    }
    assert keys["gpu"] == [
        "eks-ddp:vpc.existingVpcId",
        "eks-ddp:vpc.existingPrivateSubnetIds.us-east-1a",
        "eks-ddp:vpc.existingPrivateSubnetIds.us-east-1b",
        "eks-ddp:vpc.existingPublicSubnetIds[0]",
        "eks-ddp:nodeGroups[1].capacityReservationId",
    ]
    assert keys["gpu-existing"][4:] == [
        "eks-ddp:storage.fileSystemId",
        "eks-ddp:storage.dnsName",
        "eks-ddp:storage.mountName",
        "eks-ddp:storage.securityGroupId",
    ]
    assert keys["trainium"] == keys["own-code"] == ["eks-ddp:image"]
    assert keys["dev"] == keys["cpu"] == keys["workshop"] == []


def test_against_aws_the_first_placeholder_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placeholders, "under_mocks", lambda: False)
    values, _ = stack_file.load("gpu")
    with pytest.raises(ConfigError) as refused:
        placeholders.refuse(values, "eks-ddp:")
    assert str(refused.value) == (
        "eks-ddp:vpc.existingVpcId: 'vpc-0123456789abcdef0' is not allowed; it is the stack file's placeholder: "
        "put your VPC's id (aws ec2 describe-vpcs) there"
    )
    mine = {**values, "vpc": {"cidr": "10.0.0.0/16", "availabilityZones": ["us-east-1a", "us-east-1b"]}}
    mine["nodeGroups"] = [
        {**group, "capacityReservationId": "cr-0a9b8c7d6e5f40312"} if "capacityReservationId" in group else group
        for group in values["nodeGroups"]
    ]
    placeholders.refuse(mine, "eks-ddp:")  # real-looking ids pass


def test_the_mocks_are_recognised_so_the_offline_preview_keeps_them(
    pulumi_mocks: Recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert placeholders.under_mocks()
    assert preview.main(["--stack", "gpu-existing", "--manifests", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == (
        "  placeholder eks-ddp:vpc.existingVpcId: vpc-0123456789abcdef0; put your VPC's id "
        "(aws ec2 describe-vpcs) there (`pulumi up` refuses it)"
    )
    assert sum(line.startswith("  placeholder ") for line in lines) == 8


def test_every_written_manifest_says_its_ids_are_the_mocks(tmp_path: Path) -> None:
    assert preview.main(["--stack", "dev", "--manifests", str(tmp_path)]) == 0
    manifests = sorted(tmp_path.glob("*.yaml"))
    assert manifests and all(m.read_text().startswith(preview.MOCKED_HEADER) for m in manifests)
