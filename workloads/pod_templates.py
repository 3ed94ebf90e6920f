"""Where a Kubernetes object keeps its pod templates: the one walk for the workloads that label and place them, the
preview that shows them and the rules that read them."""

from typing import Any


def pod_templates(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod templates (metadata and spec), themselves, not copies, of a Job or any object with `spec.template`, an
    operator's job (`*ReplicaSpecs`: one per replica type, as Kueue makes its pod sets) or a training runtime (one per
    replicated job); none for anything else."""
    spec = manifest.get("spec", {})
    replicated = spec.get("template", {}).get("spec", {}).get("replicatedJobs")
    if replicated is not None:
        return [job.get("template", {}).get("spec", {}).get("template", {}) for job in replicated]
    if "template" in spec:
        return [spec["template"]]
    replica_specs = [value for key, value in spec.items() if key.endswith("ReplicaSpecs")]  # pytorch, mpi, ...
    return [replica.get("template", {}) for specs in replica_specs for replica in specs.values()]
