"""The policy pack's checks of Kubernetes objects: namespaces' Pod Security, and the training jobs and runtimes.

A training job's own rules are the ones its component applies before registering it (workloads.pytorchjob,
workloads.trainjob): here they meet any PyTorchJob or TrainJob of the stack, written by hand too.
"""

from eks_ddp.infra.aws.efa_node_group import EFA_LABEL, EFA_RESOURCE
from eks_ddp.policy.resources import Props
from eks_ddp.workloads import pytorchjob, trainjob

POD_SECURITY_ENFORCE = "pod-security.kubernetes.io/enforce"


def namespace_pod_security(_: str, props: Props) -> list[str]:
    """Without the label a namespace admits privileged pods (Pod Security Admission's default level)."""
    level = ((props.get("metadata") or {}).get("labels") or {}).get(POD_SECURITY_ENFORCE)
    if level in ("baseline", "restricted"):
        return []
    return [f"{POD_SECURITY_ENFORCE} is {level or 'unset'}: the namespace admits privileged pods"]


def _efa_unrequested(kind: str, pod: Props) -> list[str]:
    """A pod on EFA nodes must request the interfaces, or NCCL falls back to TCP."""
    if (pod.get("nodeSelector") or {}).get(EFA_LABEL) != "true":
        return []
    return [
        f"{kind} runs on EFA nodes without requesting {EFA_RESOURCE} (NCCL would fall back to TCP)"
        for container in pod.get("containers") or []
        if not ((container.get("resources") or {}).get("limits") or {}).get(EFA_RESOURCE)
    ]


def pytorchjob_sane(_: str, props: Props) -> list[str]:
    spec = props.get("spec") or {}
    problems = pytorchjob.processes_unset(spec)
    for kind, pod in pytorchjob.replica_pods(spec):
        problems += pytorchjob.container_unnamed(kind, pod) + _efa_unrequested(kind, pod)
    return problems


def trainjob_sane(_: str, props: Props) -> list[str]:
    return trainjob.processes_unset((props.get("spec") or {}).get("trainer") or {})


def training_runtime_sane(_: str, props: Props) -> list[str]:
    jobs = ((((props.get("spec") or {}).get("template") or {}).get("spec") or {}).get("replicatedJobs")) or []
    problems = []
    for job in jobs:
        pod = ((((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")) or {}
        problems += _efa_unrequested(f"replicated job {job.get('name')}", pod)
    return problems
