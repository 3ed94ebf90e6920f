"""A queued job's marks: the LocalQueue's label on the object Kueue watches, the topology request on every pod template
Kueue makes a pod set of (for a TrainJob, its runtime's); nothing of either on a job that is not queued."""

import pytest

from eks_ddp.infra.addons.kueue import PODSET_GROUP_ANNOTATION, QUEUE_LABEL, TOPOLOGY_ANNOTATIONS
from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES
from eks_ddp.infra.facts.network_topology import CLOSEST_LAYER
from eks_ddp.workloads import indexed_job, pytorchjob, queueing, trainjob
from eks_ddp.workloads.pod_templates import pod_templates
from eks_ddp.workloads.target import NodeTarget
from eks_ddp.workloads.training_pod import TrainingJob

P5 = NodeTarget(EFA_INSTANCE_TYPES["p5.48xlarge"], efa_interfaces=32, labels={"vpc.amazonaws.com/efa.present": "true"})
JOB = TrainingJob(name="mnist-ddp", namespace="training", image="registry/eks-ddp-trainer:1", replicas=3)
RENDERED = {
    "PyTorchJob": pytorchjob.render(JOB, P5),
    "ClusterTrainingRuntime": trainjob.render_runtime(JOB, P5),
    "Job": indexed_job.render(JOB, P5)[1],
}


@pytest.mark.parametrize("kind", sorted(RENDERED))
@pytest.mark.parametrize("placement", sorted(TOPOLOGY_ANNOTATIONS))
def test_every_pod_template_asks_for_one_closest_layer_node(kind: str, placement: str) -> None:
    placed = queueing.placed(RENDERED[kind], placement)
    templates = pod_templates(placed)
    assert len(templates) == {"PyTorchJob": 2, "ClusterTrainingRuntime": 1, "Job": 1}[kind]
    for template in templates:
        assert template["metadata"]["annotations"][TOPOLOGY_ANNOTATIONS[placement]] == CLOSEST_LAYER
        # a master and its workers are one fit, under one node of the layer
        assert (PODSET_GROUP_ANNOTATION in template["metadata"]["annotations"]) == (len(templates) > 1)
    assert all(TOPOLOGY_ANNOTATIONS[placement] not in (t.get("metadata", {}).get("annotations") or {})
               for t in pod_templates(RENDERED[kind])), "the rendered manifest itself was changed"


def test_the_queue_label_goes_on_the_object_kueue_watches_and_nothing_without_a_queue() -> None:
    job = trainjob.render(JOB, P5)
    assert queueing.queued(job, "vision")["metadata"]["labels"][QUEUE_LABEL] == "vision"
    assert QUEUE_LABEL not in job["metadata"].get("labels", {})
    assert queueing.queued(job, None) is job and queueing.placed(job, None) is job
