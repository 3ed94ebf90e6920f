"""The policy pack's checks of IAM: whom a role trusts, and what a policy allows. Policy documents arrive as JSON
text or as parsed objects, depending on the resource."""

import json
from typing import Any

from eks_ddp.policy.resources import Props


def document(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return value if isinstance(value, dict) else None


def statements(policy: dict[str, Any] | None) -> list[dict[str, Any]]:
    found = (policy or {}).get("Statement", [])
    return [found] if isinstance(found, dict) else [s for s in found if isinstance(s, dict)]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _condition_keys(statement: dict[str, Any]) -> set[str]:
    """The keys a statement's conditions test, whatever the operator (StringEquals, StringLike, ...)."""
    conditions = (statement.get("Condition") or {}).values()
    return {key for operator in conditions if isinstance(operator, dict) for key in operator}


def oidc_trust_conditions(_: str, props: Props) -> list[str]:
    problems = []
    for statement in statements(document(props.get("assumeRolePolicy"))):
        federated = _as_list((statement.get("Principal") or {}).get("Federated", []))
        if not any("oidc-provider" in str(principal) for principal in federated):
            continue
        keys = _condition_keys(statement)
        for suffix in (":sub", ":aud"):
            if not any(key.endswith(suffix) for key in keys):
                problems.append(f"a role trusted through an OIDC provider has no `{suffix[1:]}` condition")
    return problems


POD_IDENTITY_TAGS = ("aws:RequestTag/kubernetes-namespace", "aws:RequestTag/kubernetes-service-account")


def pod_identity_trust_scoped(_: str, props: Props) -> list[str]:
    """EKS Pod Identity assumes a role for any association in the account that names it: only conditions on the session
    tags it sets confine the role to one namespace's service account (EKS user guide, pod-id-role.html)."""
    problems = []
    for statement in statements(document(props.get("assumeRolePolicy"))):
        if "pods.eks.amazonaws.com" not in _as_list((statement.get("Principal") or {}).get("Service", [])):
            continue
        keys = _condition_keys(statement)
        problems += [
            f"a role trusted by EKS Pod Identity has no `{tag}` condition"
            for tag in POD_IDENTITY_TAGS
            if tag not in keys
        ]
    return problems


def no_wildcard_admin(_: str, props: Props) -> list[str]:
    for statement in statements(document(props.get("policy"))):
        if (
            statement.get("Effect") == "Allow"
            and "*" in _as_list(statement.get("Action"))
            and "*" in _as_list(statement.get("Resource"))
        ):
            return ['a statement allows "Action": "*" on "Resource": "*"']
    return []
