"""A new stack key is declared in one place, and reaches what `pulumi up` creates with nothing else to change.

A top-level key is its Pulumi.yaml declaration: named for a platform argument by the naming rule (stack.keys), it is
read with its declared type and passed on. A section's key is its argument type's field (stack.sections): the job's
`checkpoint_every`, which the stack keeps at its default today, becomes `eks-ddp:job.checkpointEvery` when the job
section stops hiding it. Each is shown reaching a registered object, and refused in one line naming it.
"""

from pathlib import Path
from typing import Any

import pytest
import yaml

from eks_ddp.stack import sections
from eks_ddp.stack.config import ConfigError, parse
from eks_ddp.stack.keys import Section
from eks_ddp.stack.project_config import ROOT
from eks_ddp.tools.mocking import Registration, run_under_mocks

REGION = "us-east-1"
STACK: dict[str, Any] = {
    "nodeGroups": [
        {"name": "system", "instanceType": "m7g.large", "desiredSize": 2},
        {"name": "workers", "instanceType": "c7g.4xlarge", "availabilityZone": "us-east-1a", "maxSize": 2,
         "efa": False},
    ],
    "storage": {"kind": "none"},
    "job": {"nodeGroup": "workers", "dataset": "digits", "prepareData": False, "evaluate": False},
    "fabricCheck": "off",
}


def _project_declaring(tmp_path: Path, key: str, declaration: dict[str, Any]) -> Path:
    """A copy of this program's Pulumi.yaml with one more key."""
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    project["config"][key] = declaration
    (tmp_path / "Pulumi.yaml").write_text(yaml.safe_dump(project))
    return tmp_path


def _one(registrations: list[Registration], type_: str) -> Registration:
    (found,) = [registration for registration in registrations if registration.type == type_]
    return found


def test_a_key_declared_in_pulumi_yaml_reaches_the_cluster(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="^eks-ddp:privateEndpointOnly: True is not allowed; known keys are "):
        parse({**STACK, "privateEndpointOnly": True}, REGION)  # not declared here: a misspelling to this program
    project = _project_declaring(
        tmp_path, "eks-ddp:privateEndpointOnly", {"type": "boolean", "default": False, "description": "No public API."}
    )
    public = _one(run_under_mocks(parse(STACK, REGION, project=project)), "eks:index:Cluster")
    private = _one(run_under_mocks(parse({**STACK, "privateEndpointOnly": True}, REGION, project=project)),
                   "eks:index:Cluster")
    assert public.sent["endpointPublicAccess"] is True and private.sent["endpointPublicAccess"] is False
    with pytest.raises(ConfigError) as refused:
        parse({**STACK, "privateEndpointOnly": "yes"}, REGION, project=project)
    assert str(refused.value) == "eks-ddp:privateEndpointOnly: 'yes' is not allowed; give true or false (unquoted)"


def test_a_field_the_job_section_stops_hiding_reaches_the_pytorchjob(monkeypatch: pytest.MonkeyPatch) -> None:
    job = {**STACK["job"], "checkpointEvery": 25}
    with pytest.raises(ConfigError, match="^eks-ddp:job.checkpointEvery: 25 is not allowed; known keys are "):
        parse({**STACK, "job": job}, REGION)
    shown = Section(sections.JOB.schemas, sections.JOB.hidden - {"checkpoint_every"})
    monkeypatch.setattr("eks_ddp.stack.config.JOB", shown)
    pytorchjob = _one(run_under_mocks(parse({**STACK, "job": job}, REGION)), "kubernetes:kubeflow.org/v1:PyTorchJob")
    command = pytorchjob.sent["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("--checkpoint-every") + 1] == "25"
    with pytest.raises(ConfigError) as refused:  # the job model's own rule, named by the new key
        parse({**STACK, "job": {**job, "checkpointEvery": 0}}, REGION)
    assert str(refused.value) == "eks-ddp:job.checkpointEvery: 0 is not allowed; use a whole number >= 1"
