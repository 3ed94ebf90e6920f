"""IAM documents as plain JSON (readable by tests and linters) and the node role."""

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws

from eks_ddp.infra.errors import InvalidArgument

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


PLACEHOLDER = re.compile(r"\$\{([^}]+)\}")
"""A variable in a policy file, written as CloudFormation's Fn::Sub writes one (`${AWS::Region}`, `${ClusterName}`),
so a policy ported from a template keeps its placeholders."""


def policy_file(path: Path, values: Mapping[str, str]) -> Any:
    """The JSON document at `path` with every placeholder in its keys and strings replaced by its value in `values`
    (one without a value raises KeyError: a policy must never reach IAM with a placeholder left in it)."""
    return _substituted(json.loads(path.read_text()), values)


def _substituted(node: Any, values: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return PLACEHOLDER.sub(lambda match: values[match.group(1)], node)
    if isinstance(node, list):
        return [_substituted(item, values) for item in node]
    if isinstance(node, dict):
        return {_substituted(key, values): _substituted(value, values) for key, value in node.items()}
    return node


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


class RoleAccess(str, Enum):
    """How a service account's pods get its IAM role."""

    POD_IDENTITY = "pod-identity"
    """EKS Pod Identity (default): an association of the role with the service account, served by the cluster's
    eks-pod-identity-agent, without an OIDC provider or an annotation (EKS user guide, pod-identities.html)."""
    IRSA = "irsa"
    """IAM roles for service accounts: the role trusts the cluster's OIDC provider, the service account names it."""


DEFAULT_ROLE_ACCESS = RoleAccess.POD_IDENTITY
"""The way every component gives a role unless told otherwise."""


CLUSTER_INPUTS = {RoleAccess.POD_IDENTITY: ("cluster_name",), RoleAccess.IRSA: ("oidc_provider_arn", "oidc_issuer")}
"""What each way needs to know of the cluster."""


def role_access(value: object, component: str, argument: str = "access") -> RoleAccess:
    """`value` as a RoleAccess, or the error naming the component's argument and what it allows."""
    if value not in [kind.value for kind in RoleAccess]:
        raise InvalidArgument(component, argument, value, f"use one of {', '.join(kind.value for kind in RoleAccess)}")
    return RoleAccess(value)


def cluster_inputs(component: str, access: RoleAccess, args: Mapping[str, Any]) -> dict[str, Any]:
    """The cluster's inputs `access` needs, from a component's args, or the error naming the first one missing."""
    needed = {key: args.get(key) for key in CLUSTER_INPUTS[access]}
    for key, value in needed.items():
        if value is None:
            given = " and ".join(CLUSTER_INPUTS[access])
            raise InvalidArgument(component, key, None, f"give {given} for access {access.value}")
    return needed


ROLE_ACCESS_ANNOTATION = "eks-ddp/role-access"
"""On the pods of an add-on whose service account gets a role: a new way changes their template, so the Deployment
rolls them and they get the new credentials. Without it only the service account changes, and running pods keep
the old way's environment against a trust that no longer accepts it."""


@dataclass(frozen=True)
class ServiceAccountRole:
    access: RoleAccess
    role: aws.iam.Role
    annotations: dict[str, pulumi.Output[str]] | None
    """For the service account (IRSA's role ARN), or None."""
    ready: list[pulumi.Resource]
    """What the service account's pods must start after: EKS Pod Identity's webhook gives a pod credentials only if
    its association exists when the pod is created."""

    @property
    def pod_annotations(self) -> dict[str, str]:
        return {ROLE_ACCESS_ANNOTATION: self.access.value}


def service_account_role(
    name: str,
    parent: pulumi.Resource,
    access: RoleAccess,
    cluster: Mapping[str, Any],
    account: tuple[str, str],
    tags: Mapping[str, str],
    after: Sequence[pulumi.Resource] = (),
) -> ServiceAccountRole:
    """A role only the service account `account` (namespace, name) of the cluster can assume, by `access`; the
    association is created `after` the cluster exists. `cluster` holds what cluster_inputs returned."""
    namespace, service_account = account
    if access == RoleAccess.IRSA:
        provider, issuer = cluster["oidc_provider_arn"], cluster["oidc_issuer"]
        role = irsa_role(name, parent, provider, issuer, namespace, service_account, tags)
        return ServiceAccountRole(access, role, {"eks.amazonaws.com/role-arn": role.arn}, [])
    invoke = pulumi.InvokeOutputOptions(parent=parent)
    cluster_arn = pulumi.Output.concat(
        "arn:",
        aws.get_partition_output(opts=invoke).partition,
        ":eks:",
        aws.get_region_output(opts=invoke).region,
        ":",
        aws.get_caller_identity_output(opts=invoke).account_id,
        ":cluster/",
        cluster["cluster_name"],
    )
    trust = cluster_arn.apply(lambda arn: json.dumps(pod_identity_trust(arn, namespace, service_account)))
    role = aws.iam.Role(name, assume_role_policy=trust, tags=dict(tags), opts=pulumi.ResourceOptions(parent=parent))
    association = aws.eks.PodIdentityAssociation(
        f"{name}-association",
        cluster_name=cluster["cluster_name"],
        namespace=namespace,
        service_account=service_account,
        role_arn=role.arn,
        tags=dict(tags),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(after)),
    )
    return ServiceAccountRole(access, role, None, [association])


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
