"""IAM documents as plain JSON (readable by tests and linters) and the node role."""

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

NODE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
)


def service_trust(service: str) -> dict[str, Any]:
    """Trust policy letting an AWS service (such as ec2.amazonaws.com) assume the role."""
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
    }


def irsa_trust(oidc_provider_arn: str, oidc_issuer: str, namespace: str, service_account: str) -> dict[str, Any]:
    """Trust one Kubernetes service account through the cluster's OIDC provider.

    Both conditions matter: `sub` pins the service account, `aud` pins the token's
    audience to STS (without it any token from the issuer would do).
    """
    issuer = oidc_issuer.removeprefix("https://")
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": oidc_provider_arn},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringEquals": {
                        f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                        f"{issuer}:aud": "sts.amazonaws.com",
                    }
                },
            }
        ],
    }


def policy(statements: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": [dict(statement) for statement in statements]}


def irsa_role(
    name: str,
    parent: pulumi.Resource,
    oidc_provider_arn: pulumi.Input[str],
    oidc_issuer: pulumi.Input[str],
    namespace: str,
    service_account: str,
    tags: Mapping[str, str],
) -> aws.iam.Role:
    """A role only `namespace/service_account` can assume (IRSA)."""
    trust = pulumi.Output.all(oidc_provider_arn, oidc_issuer).apply(
        lambda values: json.dumps(irsa_trust(values[0], values[1], namespace, service_account))
    )
    return aws.iam.Role(name, assume_role_policy=trust, tags=dict(tags), opts=pulumi.ResourceOptions(parent=parent))


def node_role(name: str, parent: pulumi.Resource, tags: Mapping[str, str]) -> aws.iam.Role:
    """The EC2 role of a managed node group, with the three policies EKS nodes need."""
    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(
        name, assume_role_policy=json.dumps(service_trust("ec2.amazonaws.com")), tags=dict(tags), opts=child
    )
    for policy_arn in NODE_POLICIES:
        aws.iam.RolePolicyAttachment(
            f"{name}-{policy_arn.rsplit('/', 1)[1]}", role=role.name, policy_arn=policy_arn, opts=child
        )
    return role
