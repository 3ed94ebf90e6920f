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


def pod_identity_trust(cluster_arn: str, namespace: str, service_account: str) -> dict[str, Any]:
    """Trust EKS Pod Identity for one service account of one cluster.

    `pods.eks.amazonaws.com` assumes the role for any association in the account that names it; the conditions on the
    session tags it sets (eks-cluster-arn, kubernetes-namespace, kubernetes-service-account) confine it to this one
    (EKS user guide, pod-id-role.html, "Create IAM role with trust policy required by EKS Pod Identity");
    `sts:TagSession` lets it pass them.
    """
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "pods.eks.amazonaws.com"},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": {
                    "StringEquals": {
                        "aws:RequestTag/eks-cluster-arn": cluster_arn,
                        "aws:RequestTag/kubernetes-namespace": namespace,
                        "aws:RequestTag/kubernetes-service-account": service_account,
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


def pod_identity_role(
    name: str,
    parent: pulumi.Resource,
    cluster_name: pulumi.Input[str],
    namespace: str,
    service_account: str,
    tags: Mapping[str, str],
    after: Sequence[pulumi.Resource] = (),
) -> aws.iam.Role:
    """A role only `namespace/service_account` of the cluster can assume (EKS Pod Identity), and its association,
    created `after` the cluster exists."""
    invoke = pulumi.InvokeOutputOptions(parent=parent)
    cluster_arn = pulumi.Output.concat(
        "arn:",
        aws.get_partition_output(opts=invoke).partition,
        ":eks:",
        aws.get_region_output(opts=invoke).region,
        ":",
        aws.get_caller_identity_output(opts=invoke).account_id,
        ":cluster/",
        cluster_name,
    )
    trust = cluster_arn.apply(lambda arn: json.dumps(pod_identity_trust(arn, namespace, service_account)))
    child = pulumi.ResourceOptions(parent=parent)
    role = aws.iam.Role(name, assume_role_policy=trust, tags=dict(tags), opts=child)
    aws.eks.PodIdentityAssociation(
        f"{name}-association",
        cluster_name=cluster_name,
        namespace=namespace,
        service_account=service_account,
        role_arn=role.arn,
        tags=dict(tags),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(after)),
    )
    return role


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
