import json

import pulumi_kubernetes as k8s
import pytest

from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.storage.efs import EfsStorage
from eks_ddp.infra.storage.fsx import FsxLustreStorage, valid_capacity
from eks_ddp.tools.mocking import ACCOUNT, OIDC_ISSUER
from tests.pulumi_harness import Recorded

PROVIDER_ARN = f"arn:aws:iam::{ACCOUNT}:oidc-provider/{OIDC_ISSUER}"


def _common() -> dict[str, object]:
    return {
        "provider": k8s.Provider("k8s", kubeconfig="{}"), "vpc_id": "vpc-1", "node_security_group_id": "sg-cluster",
        "oidc_provider_arn": PROVIDER_ARN, "oidc_issuer": OIDC_ISSUER, "namespace": "training", "tags": {"team": "ml"},
    }


def _fsx(**overrides: object) -> FsxLustreStorage:
    args = {**_common(), "subnet_id": "subnet-a", **overrides}
    return FsxLustreStorage("fsx", args)  # type: ignore[arg-type]


@pytest.mark.parametrize(("gib", "valid"), [(1200, True), (2400, True), (4800, True), (7200, True), (1000, False), (3600, False), (0, False)])
def test_lustre_capacity_steps(gib: int, valid: bool) -> None:
    assert valid_capacity(gib) is valid


def test_lustre_ports_storage_class_and_claim(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: _fsx(s3_import_path="s3://datasets/mnist"))
    rules = {(r.inputs["referencedSecurityGroupId"], r.inputs["fromPort"], r.inputs["toPort"]) for r in pulumi_mocks.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")}
    assert rules == {("sg-cluster", 988, 988), ("sg-cluster", 1018, 1023), ("sg-fsx-lustre", 988, 988), ("sg-fsx-lustre", 1018, 1023)}
    (storage_class,) = pulumi_mocks.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    assert storage_class.inputs["provisioner"] == "fsx.csi.aws.com" and storage_class.inputs["reclaimPolicy"] == "Retain"
    # pulumi-kubernetes awaits an Immediate claim for a fixed 5 minutes: a new file system takes longer.
    assert storage_class.inputs["volumeBindingMode"] == "WaitForFirstConsumer"
    assert storage_class.inputs["parameters"] == {
        "subnetId": "subnet-a", "securityGroupIds": "sg-fsx-lustre", "deploymentType": "SCRATCH_2", "fileSystemTypeVersion": "2.15", "s3ImportPath": "s3://datasets/mnist",
    }
    (claim,) = pulumi_mocks.of_type("kubernetes:core/v1:PersistentVolumeClaim")
    assert claim.inputs["spec"]["accessModes"] == ["ReadWriteMany"] and claim.inputs["spec"]["resources"]["requests"]["storage"] == "1200Gi"
    assert claim.inputs["metadata"] == {"name": "shared", "namespace": "training"}
    trust = json.loads(pulumi_mocks.named("fsx-csi-role").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Condition"]["StringEquals"][f"{OIDC_ISSUER}:sub"] == "system:serviceaccount:kube-system:fsx-csi-controller-sa"


def test_persistent_lustre_carries_its_throughput(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: _fsx(deployment_type="PERSISTENT_2", per_unit_storage_throughput=250, capacity_gib=4800))
    (storage_class,) = pulumi_mocks.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    assert storage_class.inputs["parameters"]["perUnitStorageThroughput"] == "250"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"capacity_gib": 1000}, "capacity_gib=1000 is not allowed; use 1200, 2400 or a multiple of 2400 GiB"),
        ({"deployment_type": "PERSISTENT_1"}, "deployment_type='PERSISTENT_1' is not allowed"),
        ({"deployment_type": "PERSISTENT_2"}, "per_unit_storage_throughput=None is not allowed; PERSISTENT_2 needs one of"),
        ({"per_unit_storage_throughput": 125}, "SCRATCH_2 has a fixed throughput"),
        ({"s3_import_path": "datasets/mnist"}, "s3_import_path='datasets/mnist' is not allowed; give an s3:// path"),
    ],
)
def test_invalid_lustre_arguments(pulumi_mocks: Recorded, overrides: dict[str, object], message: str) -> None:
    def program() -> None:
        with pytest.raises(InvalidArgument) as raised:
            _fsx(**overrides)
        assert message in str(raised.value)

    pulumi_mocks.run(program)
    assert not [r for r in pulumi_mocks.monitor.registrations if r.type.startswith(("eksddp", "aws"))]


def test_efs_is_encrypted_with_a_mount_target_per_subnet(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: EfsStorage("efs", {**_common(), "subnet_ids": ["subnet-a", "subnet-b"]}))  # type: ignore[typeddict-item]
    assert pulumi_mocks.named("efs-fs").inputs["encrypted"] is True
    assert [t.inputs["subnetId"] for t in pulumi_mocks.of_type("aws:efs/mountTarget:MountTarget")] == ["subnet-a", "subnet-b"]
    (rule,) = pulumi_mocks.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert (rule.inputs["fromPort"], rule.inputs["toPort"], rule.inputs["referencedSecurityGroupId"]) == (2049, 2049, "sg-cluster")
    (storage_class,) = pulumi_mocks.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    assert storage_class.inputs["parameters"] == {
        "provisioningMode": "efs-ap", "fileSystemId": "efs-fs-id", "directoryPerms": "700", "uid": "1000", "gid": "1000",
    }  # the access point acts as the trainer's user


def test_efs_needs_a_subnet(pulumi_mocks: Recorded) -> None:
    def program() -> None:
        with pytest.raises(InvalidArgument, match=r"EfsStorage: subnet_ids=\[\] is not allowed"):
            EfsStorage("efs", {**_common(), "subnet_ids": []})  # type: ignore[typeddict-item]

    pulumi_mocks.run(program)
