"""NodeQuarantine: a GPU pod whose pre-flight fails takes its node out of service, and nothing more.

With `restartPolicy: OnFailure` a failed init container is retried on the same node, so one bad GPU or a missing
EFA device would burn the job's restart budget in place (workloads.preflight). Instead the pod taints its own node
`NoExecute` (workloads.quarantine): the taint manager evicts the pod, its controller recreates it, and the scheduler
sends it elsewhere; the node, empty, is replaced (Karpenter's emptiness consolidation, or by hand where the group is
at its size: the README's "a bad GPU node").

The pod's service account may read nodes and patch them, and a ValidatingAdmissionPolicy narrows the patch to the
node the pod runs on (the bound token's node name: k8s.io/apiserver v0.33 pkg/authentication/serviceaccount
NodeNameKey, ServiceAccountTokenPodNodeInfo on by default since Kubernetes v1.30) and to adding or removing the one
taint: labels, `unschedulable` and every other taint stay as they were. Both are GA in the EKS versions we support
(admissionregistration.k8s.io/v1 since v1.30).
"""

from typing import Any, TypedDict, cast

import pulumi
import pulumi_kubernetes as k8s

from eks_ddp.infra.options import waits_for

COMPONENT = "NodeQuarantine"
TAINT_KEY = "eks-ddp.io/gpu-preflight-failed"
NAME = "eks-ddp-node-quarantine"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"


class NodeQuarantineArgs(TypedDict):
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    namespace: str
    """The training namespace."""
    service_account: str
    """The service account the training pods run as."""


def _unchanged_but_taint(field: str) -> str:
    keep = f"{field}.spec.taints.filter(t, t.key != '{TAINT_KEY}')"
    return f"(has({field}.spec.taints) ? {keep} : [])"


def _unschedulable(field: str) -> str:
    return f"(has({field}.spec.unschedulable) && {field}.spec.unschedulable)"


def admission_policy(namespace: str, service_account: str) -> dict[str, Any]:
    """The policy's spec: for the pods' account only, its own node and only the quarantine taint."""
    user = f"system:serviceaccount:{namespace}:{service_account}"
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
            ]
        },
        "matchConditions": [{"name": "training-pods", "expression": f"request.userInfo.username == '{user}'"}],
        "validations": [
            {
                "expression": f"'{NODE_NAME_EXTRA}' in request.userInfo.extra && "
                f"object.metadata.name in request.userInfo.extra['{NODE_NAME_EXTRA}']",
                "message": "a training pod may taint only the node it runs on",
            },
            {
                "expression": f"{_unchanged_but_taint('object')} == {_unchanged_but_taint('oldObject')} && "
                "object.metadata.labels == oldObject.metadata.labels && "
                f"{_unschedulable('object')} == {_unschedulable('oldObject')}",
                "message": f"a training pod may change only its node's {TAINT_KEY} taint",
            },
        ],
    }


class NodeQuarantine(pulumi.ComponentResource):
    def __init__(self, name: str, args: NodeQuarantineArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(f"eksddp:index:{COMPONENT}", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self, provider=args["provider"], depends_on=waits_for(opts))
        role = k8s.rbac.v1.ClusterRole(
            f"{name}-role",
            metadata={"name": NAME},
            rules=[{"api_groups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}],
            opts=child,
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-binding",
            metadata={"name": NAME},
            role_ref={"api_group": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role.metadata.name},
            subjects=[{"kind": "ServiceAccount", "name": args["service_account"], "namespace": args["namespace"]}],
            opts=child,
        )
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-policy",
            metadata={"name": NAME},
            spec=cast(Any, admission_policy(args["namespace"], args["service_account"])),  # rendered, camelCase
            opts=child,
        )
        k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-policy-binding",
            metadata={"name": NAME},
            spec={"policy_name": policy.metadata.name, "validation_actions": ["Deny"]},
            opts=child,
        )
        self.register_outputs({})
