"""A job submitted to a Kueue LocalQueue: the queue's label on the job, and its pods' request to share one network
node of EC2 (infra.addons.kueue says what Kueue does with both)."""

from typing import Any

from eks_ddp.infra.addons.kueue import PODSET_GROUP_ANNOTATION, QUEUE_LABEL, TOPOLOGY_ANNOTATIONS
from eks_ddp.infra.aws.cluster import GROUP_LABEL, SYSTEM_LABEL
from eks_ddp.infra.facts.network_topology import CLOSEST_LAYER
from eks_ddp.workloads.pod_templates import pod_templates


def _copy(value: Any) -> Any:
    """Dicts and lists copied, anything else (a Pulumi Output: an image built in the same program) shared."""
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    return [_copy(item) for item in value] if isinstance(value, list) else value


def queued(manifest: dict[str, Any], queue: str | None) -> dict[str, Any]:
    """The job labelled for its LocalQueue (a copy; the manifest itself without a queue)."""
    if queue is None:
        return manifest
    labelled = _copy(manifest)
    labelled["metadata"]["labels"] = {**labelled["metadata"].get("labels", {}), QUEUE_LABEL: queue}
    return labelled


def placed(manifest: dict[str, Any], placement: str | None) -> dict[str, Any]:
    """Every pod template of a training group asking Kueue for one CLOSEST_LAYER network node, `required` or
    `preferred` (a copy; the manifest itself without a placement). A pod set on the system group (the NCCL check's
    launcher) asks nothing: its flavor has no topology, and Kueue refuses a topology request there."""
    if placement is None:
        return manifest
    annotated = _copy(manifest)
    every = pod_templates(annotated)
    if not every:
        raise ValueError(f"no pod templates known in a {manifest['kind']}")
    templates = [t for t in every
                 if t.get("spec", {}).get("nodeSelector", {}).get(GROUP_LABEL) != SYSTEM_LABEL[GROUP_LABEL]]
    # Kueue fits each pod set on its own unless they share a group: a PyTorchJob's master and workers would each get
    # a layer-3 node, two different ones (v0.17.0 pkg/cache/scheduler/tas_flavor_snapshot.go: a group is one fit, its
    # one-pod set the leader).
    group = {PODSET_GROUP_ANNOTATION: "job"} if len(templates) > 1 else {}
    for template in templates:
        metadata = template.setdefault("metadata", {})
        metadata["annotations"] = {**metadata.get("annotations", {}), TOPOLOGY_ANNOTATIONS[placement]: CLOSEST_LAYER,
                                   **group}
    return annotated
