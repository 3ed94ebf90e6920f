"""The CSI driver a shared file system is mounted (and, for a new one, provisioned) by: its chart in kube-system, the
controller on the system nodes, the node plugin on every node (training nodes' taints included)."""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from eks_ddp.infra.addons import helm
from eks_ddp.infra.aws.cluster import SYSTEM_LABEL
from eks_ddp.infra.aws.iam import irsa_role
from eks_ddp.infra.storage.shared_claim import SharedStorageArgs

NAMESPACE = "kube-system"


@dataclass(frozen=True)
class ControllerAccount:
    """The controller's service account, which the chart creates, and the role it is annotated with."""

    name: str
    role: aws.iam.Role

    def values(self) -> dict[str, Any]:
        return {"create": True, "name": self.name, "annotations": {"eks.amazonaws.com/role-arn": self.role.arn}}


def controller_account(
    name: str, parent: pulumi.Resource, args: SharedStorageArgs, account: str, document: Mapping[str, Any]
) -> ControllerAccount:
    """An IRSA role only the controller's service account `account` can assume, allowed `document`: what a driver
    that creates cloud resources (file systems, access points) needs."""
    role = irsa_role(
        f"{name}-csi-role",
        parent,
        args["oidc_provider_arn"],
        args["oidc_issuer"],
        NAMESPACE,
        account,
        args.get("tags", {}),
    )
    aws.iam.RolePolicy(
        f"{name}-csi-policy", role=role.id, policy=json.dumps(document), opts=pulumi.ResourceOptions(parent=parent)
    )
    return ControllerAccount(account, role)


def csi_driver(
    name: str,
    parent: pulumi.Resource,
    provider: k8s.Provider,
    chart: tuple[str, str, str],
    depends_on: Sequence[pulumi.Resource],
    account: ControllerAccount | None = None,
) -> k8s.helm.v3.Release:
    """The driver's chart; without `account` its controller keeps the chart's own service account (one that only
    mounts needs no role)."""
    controller: dict[str, Any] = {"nodeSelector": SYSTEM_LABEL}
    if account is not None:
        controller["serviceAccount"] = account.values()
    values = {"controller": controller, "node": {"tolerateAllTaints": True}}
    return helm.release(f"{name}-csi", parent, provider, chart, NAMESPACE, values, depends_on)
