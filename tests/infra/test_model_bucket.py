import json

import pulumi_kubernetes as k8s
import pytest

from eks_ddp.infra.aws.iam import irsa_trust, pod_identity_trust
from eks_ddp.infra.aws.model_bucket import CHECKPOINTS_PREFIX, ModelBucket
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.tools.mocking import ACCOUNT, OIDC_ISSUER
from eks_ddp.workloads.training_pod import TrainingJob, artifact_arguments
from tests.pulumi_harness import Recorded

PROVIDER_ARN = f"arn:aws:iam::{ACCOUNT}:oidc-provider/{OIDC_ISSUER}"
IRSA = {"access": "irsa", "oidc_provider_arn": PROVIDER_ARN, "oidc_issuer": OIDC_ISSUER}


def _bucket(**overrides: object) -> ModelBucket:
    args: dict[str, object] = {
        "cluster_name": "eks-ddp", "namespace": "training",
        "provider": k8s.Provider("k8s", kubeconfig="{}"), "tags": {"team": "ml"},
    }
    args.update(overrides)
    return ModelBucket("models", args)  # type: ignore[arg-type]


def test_irsa_trust_pins_service_account_and_audience() -> None:
    trust = irsa_trust(PROVIDER_ARN, f"https://{OIDC_ISSUER}", "training", "trainer")
    statement = trust["Statement"][0]
    assert statement["Principal"] == {"Federated": PROVIDER_ARN} and statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Condition"]["StringEquals"] == {
        f"{OIDC_ISSUER}:sub": "system:serviceaccount:training:trainer",
        f"{OIDC_ISSUER}:aud": "sts.amazonaws.com",
    }


def test_bucket_is_private_encrypted_versioned_and_tls_only(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: _bucket(checkpoint_expiry_days=30))
    block = pulumi_mocks.named("models-public-access").inputs
    assert all(block[key] is True for key in ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
    assert pulumi_mocks.named("models-encryption").inputs["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
    assert pulumi_mocks.named("models-versioning").inputs["versioningConfiguration"] == {"status": "Enabled"}
    deny = json.loads(pulumi_mocks.named("models-tls-only").inputs["policy"])["Statement"][0]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert pulumi_mocks.named("models-bucket").inputs["forceDestroy"] is False


def test_role_is_limited_to_this_bucket_and_this_service_account(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: _bucket())
    bucket_arn = pulumi_mocks.named("models-bucket").inputs["arn"]
    statements = json.loads(pulumi_mocks.named("models-access").inputs["policy"])["Statement"]
    assert {s["Resource"] for s in statements} == {bucket_arn, f"{bucket_arn}/*", f"{bucket_arn}/{CHECKPOINTS_PREFIX}*"}
    deleting = [s for s in statements if any("Delete" in action for action in s["Action"])]
    assert [(s["Action"], s["Resource"]) for s in deleting] == [(["s3:DeleteObject"], f"{bucket_arn}/checkpoints/*")]
    assert not any(action == "s3:*" or action == "*" for s in statements for action in s["Action"])
    trust = json.loads(pulumi_mocks.named("models-role").inputs["assumeRolePolicy"])
    cluster_arn = f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/eks-ddp"
    assert trust == pod_identity_trust(cluster_arn, "training", "trainer")


def test_pod_identity_is_the_default_scoped_to_the_clusters_namespace_and_service_account(pulumi_mocks: Recorded) -> None:
    """The association gives the role to training/trainer; the trust's session-tag conditions refuse any other
    association in the account that names the role; the service account carries no role annotation."""
    pulumi_mocks.run(lambda: _bucket())
    role = pulumi_mocks.named("models-role").inputs
    association = pulumi_mocks.named("models-role-association").inputs
    expected = {"clusterName": "eks-ddp", "namespace": "training", "serviceAccount": "trainer", "roleArn": role["arn"]}
    assert {key: association.get(key) for key in expected} == expected
    statement = json.loads(role["assumeRolePolicy"])["Statement"][0]
    assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    assert statement["Condition"]["StringEquals"] == {
        "aws:RequestTag/eks-cluster-arn": f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/eks-ddp",
        "aws:RequestTag/kubernetes-namespace": "training",
        "aws:RequestTag/kubernetes-service-account": "trainer",
    }
    assert "annotations" not in pulumi_mocks.named("models-service-account").inputs["metadata"]


def test_irsa_stays_an_option(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: _bucket(**IRSA, cluster_name=None))
    trust = json.loads(pulumi_mocks.named("models-role").inputs["assumeRolePolicy"])
    assert trust == irsa_trust(PROVIDER_ARN, OIDC_ISSUER, "training", "trainer")
    account = pulumi_mocks.named("models-service-account").inputs["metadata"]
    assert account["annotations"]["eks.amazonaws.com/role-arn"] == pulumi_mocks.named("models-role").inputs["arn"]
    assert not [r for r in pulumi_mocks.monitor.registrations if r.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation"]


@pytest.mark.parametrize("days", [None, 30])
def test_incomplete_uploads_are_aborted_and_pruned_checkpoints_expire_with_or_without_expiry(
    pulumi_mocks: Recorded, days: int | None
) -> None:
    pulumi_mocks.run(lambda: _bucket(**({} if days is None else {"checkpoint_expiry_days": days})))
    aborted, checkpoints = pulumi_mocks.named("models-lifecycle").inputs["rules"]
    assert aborted == {
        "id": "abort-incomplete-uploads", "status": "Enabled", "filter": {},  # every key
        "abortIncompleteMultipartUpload": {"daysAfterInitiation": 1},
    }
    assert checkpoints["filter"] == {"prefix": CHECKPOINTS_PREFIX} and checkpoints["status"] == "Enabled"
    assert checkpoints["noncurrentVersionExpiration"] == {"noncurrentDays": 1}  # what the trainer's deletes leave
    assert checkpoints.get("expiration") == (None if days is None else {"days": days})


def test_jobs_put_their_checkpoints_where_the_role_may_delete() -> None:
    job = TrainingJob(name="mnist", namespace="training", image="i:1", artifact_bucket="models")
    arguments = artifact_arguments(job, "run")
    uri = arguments[arguments.index("--checkpoint-uri") + 1]
    assert uri == f"s3://models/{CHECKPOINTS_PREFIX}mnist/run"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"checkpoint_expiry_days": 0}, "checkpoint_expiry_days=0 is not allowed"),
        ({"service_account_name": "Trainer_SA"}, "service_account_name='Trainer_SA' is not allowed; use a DNS-1123 subdomain"),
        ({"access": "keys"}, "access='keys' is not allowed; use one of pod-identity, irsa"),
        ({"cluster_name": None}, "cluster_name=None is not allowed; give cluster_name for access pod-identity"),
        ({"access": "irsa"}, "oidc_provider_arn=None is not allowed; give oidc_provider_arn and oidc_issuer for access irsa"),
    ],
)
def test_invalid_arguments_are_refused(pulumi_mocks: Recorded, overrides: dict[str, object], message: str) -> None:
    def program() -> None:
        with pytest.raises(InvalidArgument) as raised:
            _bucket(**overrides)
        assert message in str(raised.value)

    pulumi_mocks.run(program)
    assert [r.type for r in pulumi_mocks.monitor.registrations] == ["pulumi:providers:kubernetes"]
