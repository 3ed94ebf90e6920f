import pytest

from eks_ddp.infra.aws.cluster import ADMIN_POLICY, Cluster, ClusterArgs
from eks_ddp.infra.errors import InvalidArgument
from tests.pulumi_harness import Recorded


def _args(**overrides: object) -> ClusterArgs:
    args: dict[str, object] = {"vpc_id": "vpc-1", "private_subnet_ids": ["subnet-a", "subnet-b"], "tags": {"team": "ml"}}
    args.update(overrides)
    return args  # type: ignore[return-value]


def test_control_plane_is_locked_down_and_observable(pulumi_mocks: Recorded) -> None:
    admin = "arn:aws:iam::123456789012:role/platform-admin"
    pulumi_mocks.run(lambda: Cluster("training", _args(admin_principal_arns=[admin])))
    cluster = pulumi_mocks.named("training-eks").inputs
    assert cluster["name"] == "training" and cluster["version"] == "1.35"
    assert cluster["authenticationMode"] == "API" and cluster["createOidcProvider"] is True and cluster["skipDefaultNodeGroup"] is True
    assert cluster["enabledClusterLogTypes"] == ["api", "audit", "authenticator", "controllerManager", "scheduler"]
    assert cluster["encryptionConfigKeyArn"] == pulumi_mocks.named("training-secrets").inputs["arn"]
    assert pulumi_mocks.named("training-secrets").inputs["enableKeyRotation"] is True
    addons = {r.inputs["addonName"] for r in pulumi_mocks.of_type("aws:eks/addon:Addon")}
    assert addons == {"vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent"}
    entry = pulumi_mocks.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")[0].inputs
    assert entry["principalArn"] == admin and entry["policyArn"] == ADMIN_POLICY and entry["accessScope"] == {"type": "cluster"}
    system = pulumi_mocks.named("training-system").inputs
    assert system["amiType"] == "AL2023_ARM_64_STANDARD" and system["instanceTypes"] == ["m7g.large"]
    template = pulumi_mocks.named("training-system-template").inputs
    assert template["metadataOptions"]["httpTokens"] == "required"
    provider = pulumi_mocks.named("training-k8s").inputs
    assert provider["enableServerSideApply"] == "true"


def test_coredns_waits_for_the_system_nodes(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: Cluster("training", _args()))
    coredns = pulumi_mocks.named("training-coredns")
    assert pulumi_mocks.named("training-system").urn in coredns.dependencies


def test_private_endpoint(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: Cluster("training", _args(private_endpoint_only=True)))
    cluster = pulumi_mocks.named("training-eks").inputs
    assert cluster["endpointPublicAccess"] is False and cluster["endpointPrivateAccess"] is True


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"kubernetes_version": "1.x"}, "kubernetes_version='1.x' is not allowed; use one of 1.34, 1.35"),
        ({"kubernetes_version": "1.29"}, "kubernetes_version='1.29' is not allowed"),
        ({"cluster_name": "-bad name"}, "cluster_name='-bad name' is not allowed"),
        ({"admin_principal_arns": ["admin"]}, "admin_principal_arns='admin' is not allowed; give IAM role or user ARNs"),
        ({"log_types": ["api", "everything"]}, "log_types=['everything'] is not allowed"),
        ({"system_instance_type": "m5"}, "system_instance_type='m5' is not allowed; give an EC2 instance type such as"),
        ({"system_node_count": 0}, "system_node_count=0 is not allowed; use 1 to 10"),
        ({"private_endpoint_only": True, "public_access_cidrs": ["1.2.3.4/32"]}, "a private-only endpoint has no public access"),
    ],
)
def test_invalid_arguments_are_refused_before_anything_exists(pulumi_mocks: Recorded, overrides: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        Cluster("training", _args(**overrides))
    assert message in str(raised.value)
    assert pulumi_mocks.monitor.registrations == []


def test_a_pinned_vpc_cni_older_than_efa_only_support_is_refused(pulumi_mocks: Recorded, monkeypatch: pytest.MonkeyPatch) -> None:
    from eks_ddp.infra.facts import versions

    monkeypatch.setitem(versions.ADDON_VERSIONS, "vpc-cni", "v1.18.3-eksbuild.1")
    with pytest.raises(InvalidArgument, match=r"vpc-cni'\]='v1.18.3-eksbuild.1' is not allowed; efa-only interfaces need vpc-cni >= 1.18.4"):
        Cluster("training", _args())
    monkeypatch.setitem(versions.ADDON_VERSIONS, "vpc-cni", "v1.18.4-eksbuild.1")
    pulumi_mocks.run(lambda: Cluster("training", _args()))
    assert pulumi_mocks.named("training-vpc-cni").inputs["addonVersion"] == "v1.18.4-eksbuild.1"


def test_the_deploying_principal_gets_no_second_access_entry(pulumi_mocks: Recorded) -> None:
    """pulumi-eks already makes the creator an admin: a second entry would fail with ResourceInUseException."""
    from eks_ddp.tools.mocking import DEPLOYER_ROLE_ARN

    other = "arn:aws:iam::123456789012:role/platform-admin"
    pulumi_mocks.run(lambda: Cluster("training", _args(admin_principal_arns=[DEPLOYER_ROLE_ARN, other])))
    entries = [r.inputs["principalArn"] for r in pulumi_mocks.of_type("aws:eks/accessEntry:AccessEntry")]
    assert entries == [other]
