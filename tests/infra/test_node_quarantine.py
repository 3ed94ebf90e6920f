"""NodeQuarantine: what the stack registers for the training pods to taint their own node. What the admission policy
lets a token do the API server itself decides (tests/cluster/test_quarantine_on_engines.py)."""

from typing import Any

from eks_ddp.infra.addons.node_quarantine import NAME
from eks_ddp.tools import stack_file
from eks_ddp.stack.config import parse
from eks_ddp.tools.mocking import run_under_mocks
from eks_ddp.tools.mocking import Registration


def _registrations(stack: str, **config: Any) -> list[Registration]:
    values, region = stack_file.load(stack)
    return run_under_mocks(parse({**values, **config}, region), stack=stack)


def test_gpu_stacks_grant_the_taint_and_bind_the_policy_cpu_stacks_do_not() -> None:
    gpu = _registrations("gpu")
    role = next(r for r in gpu if r.type == "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole" and r.name.endswith(
        "node-quarantine-role"))
    assert role.inputs["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    binding = next(r for r in gpu if r.type.endswith("ValidatingAdmissionPolicyBinding"))
    assert binding.inputs["spec"] == {"policyName": NAME, "validationActions": ["Deny"]}
    assert not [r for r in _registrations("dev") if r.type.endswith("ValidatingAdmissionPolicy")]
    assert not [r for r in _registrations("gpu", nodeHealth=False) if r.type.endswith("ValidatingAdmissionPolicy")]
