"""Stack configuration: `eks-ddp:*` values in, typed settings out (stack.settings), errors naming the key.

`from_pulumi` reads what `pulumi up` gives the program; the offline preview, the local demo and the rehearsal pass
what they read from `Pulumi.<stack>.yaml` to `parse`. Each key is its argument's, by one naming rule (stack.keys), in
the section its argument type declares (stack.sections); its type is checked here, strictly (a string is not a
boolean), and its value by the component or the model that owns it, before any resource is registered: errors name
the stack key (`eks-ddp:nodeGroups[1].instanceType`), the value and what is allowed. The platform's keys are
stack.platform_keys'; the job's are read here: its road from the stack file to the PyTorchJob is
docs/development.md's example.
"""

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pulumi
import pulumi_aws as aws

from eks_ddp.infra import platform
from eks_ddp.infra.addons.training_operator import OperatorKind
from eks_ddp.infra.aws.cluster import DEFAULT_SYSTEM_INSTANCE_TYPE
from eks_ddp.infra.aws.efa_node_group import NodeGroupShape
from eks_ddp.infra.existing_cluster import aws_side_problem, facts_for
from eks_ddp.infra.facts import instance_facts
from eks_ddp.infra.facts.catalogue import Architecture
from eks_ddp.infra.node_group import NodeGroup
from eks_ddp.infra.platform import StorageKind, TrainingPlatformArgs, system_shape
from eks_ddp.infra.platform_args import DEFAULT_NAMESPACE
from eks_ddp.stack import placeholders, project_config
from eks_ddp.stack.keys import ConfigError, choice, key, read, stack_word, string_values, strings
from eks_ddp.stack.platform_keys import read_platform
from eks_ddp.stack.project_config import PROJECT, ROOT
from eks_ddp.stack.sections import JOB, Layout, top_level
from eks_ddp.stack.settings import (
    BUILT_IMAGE,
    SYSTEM_GROUP,
    Describe,
    FabricCheck,
    JobSettings,
    StackConfig,
)
from eks_ddp.workloads.job import DOWNLOADABLE_DATASETS, TrainingJobSpec, UserCodeSpec, problems, resolve

__all__ = ["BUILT_IMAGE", "SYSTEM_GROUP", "ConfigError", "FabricCheck", "JobSettings", "StackConfig", "parse"]

# The regions the AWS provider `pulumi up` runs knows (pulumi-aws `Region`, which its region validation follows).
REGIONS = [region.value for region in aws.Region]


def _region(region: str | None) -> str:
    """`aws:region` must be a region the AWS provider knows: a typo would otherwise preview and rehearse clean."""
    if not region:
        raise ConfigError("aws:region", region, "set the AWS region, e.g. `pulumi config set aws:region us-east-1`")
    if region not in REGIONS:
        near = difflib.get_close_matches(region, REGIONS, n=3, cutoff=0.6)
        hint = f"did you mean {', '.join(near)}?" if near else f"use one of {', '.join(REGIONS)}"
        raise ConfigError("aws:region", region, f"no AWS region of that name; {hint}")
    return region


JOB_NAME = "mnist-ddp"
"""The job's name when the stack names none."""
WHERE = key("job")
FIXED_GROUP = "node group {group} keeps its desiredSize={size} nodes, one pod each (eks-ddp:autoscaler none adds none)"
"""A group without an autoscaler holds its desiredSize nodes (infra.platform.reachable_groups), and says why."""


def job_key(field: str) -> str:
    """The stack key of a spec's field path: `replicas` -> `eks-ddp:job.replicas`, the code's `code.script` ->
    `eks-ddp:job.script` (a stack's job keys are flat)."""
    return f"{WHERE}.{stack_word(field.removeprefix('code.'))}"


def _read_job(raw: Any, groups: Sequence[NodeGroupShape], describe: Describe, *, fixed: bool, namespace: str,
             image: str, shared: bool) -> JobSettings | None:
    """The job's settings, checked against the groups as the nodes they can reach (`fixed`: at their desiredSize)."""
    if not raw:  # the project default, {}: no job
        return None
    fields = JOB.read(raw, WHERE)
    by_name = {group.get("name", ""): group for group in groups}
    target = fields.pop("node_group", None)
    if target not in by_name:
        raise ConfigError(job_key("node_group"), target, f"use one of the node groups: {', '.join(by_name)}")
    prepare, evaluate = fields.pop("prepare_data", None), fields.pop("evaluate", None)
    spec = cast(TrainingJobSpec, {"name": JOB_NAME, **fields, "namespace": namespace, "image": image})
    code = _user_code(spec, image)
    if not shared:  # scratch space: what must last goes to the model bucket
        spec["claim_name"] = None
    _refuse_problems(spec, target, by_name[target], describe, fixed)
    if code is not None:
        _no_bundled_steps(prepare, evaluate)
        return JobSettings(target, spec, prepare_data=False, evaluate=False)
    dataset = resolve(spec).dataset
    prepare = dataset in DOWNLOADABLE_DATASETS and shared if prepare is None else prepare
    _check_preparation(prepare, dataset, shared)
    return JobSettings(target, spec, prepare_data=prepare, evaluate=True if evaluate is None else evaluate)


def _refuse_problems(
    spec: TrainingJobSpec, target: str, group: NodeGroupShape, describe: Describe, fixed: bool
) -> None:
    """The first rule of the job's model the settings break, named by its key."""
    size = NodeGroup.of(group).max_size
    found = problems(resolve(spec), target, size, describe(group["instance_type"]))
    if not found:
        return
    field, value, allowed = found[0]
    written: dict[str, Any] = {**spec.get("code", {})}  # the user's code as the stack file has it
    if field == "replicas" and fixed:
        allowed = FIXED_GROUP.format(group=target, size=size)
    raise ConfigError(job_key(field), written.get(field.removeprefix("code."), value), allowed)


def _user_code(spec: TrainingJobSpec, image: str) -> UserCodeSpec | None:
    """`job.script` (with `job.args` and `job.env`) as the spec's `code`: the user's own code, in the user's image."""
    flat = cast(dict[str, Any], spec)
    if "script" not in flat:
        for other in ("args", "env"):
            if other in flat:
                raise ConfigError(job_key(other), flat[other], "it goes with job.script: set job.script too")
        return None
    if image == BUILT_IMAGE:
        raise ConfigError(
            job_key("script"),
            flat["script"],
            "it runs in your own image: set eks-ddp:image to an "
            "image that contains it (the image the stack builds holds only the bundled trainer)",
        )
    code: UserCodeSpec = {
        "script": flat.pop("script"),
        "args": strings(flat.pop("args", []), job_key("args")),
        "env": string_values(flat.pop("env", {}), job_key("env")),
    }
    spec["code"] = code
    return code


def _no_bundled_steps(prepare: bool | None, evaluate: bool | None) -> None:
    """Data preparation and evaluation run the bundled trainer: a job with its own code does both in its script."""
    for field, value in (("prepare_data", prepare), ("evaluate", evaluate)):
        if value:
            raise ConfigError(
                job_key(field),
                True,
                "it runs the bundled trainer: a job with its own script prepares and evaluates in that script; "
                "leave it unset",
            )


def _check_preparation(prepare: bool, dataset: str, shared: bool) -> None:
    if prepare and not shared:
        raise ConfigError(
            job_key("prepare_data"),
            prepare,
            "it fills the shared volume, and eks-ddp:storage is none: "
            "each pod fetches the data into its scratch space itself",
        )
    if prepare and dataset not in DOWNLOADABLE_DATASETS:
        raise ConfigError(
            job_key("prepare_data"),
            prepare,
            f"only {', '.join(DOWNLOADABLE_DATASETS)} are downloaded; {dataset} is not",
        )


def _side_steps_fit_system_nodes(
    platform_args: TrainingPlatformArgs, job: JobSettings, describe: Describe, layout: Layout
) -> None:
    """Data preparation and evaluation run on the system nodes in the job's image (workloads.batch_jobs): the
    system type must share the image's architecture, or their pods are never placed."""
    system_type = platform_args.get("system_instance_type", DEFAULT_SYSTEM_INSTANCE_TYPE)
    groups = [*platform_args.get("node_groups", []), system_shape(platform_args)]
    group = next(g for g in groups if g.get("name") == job.node_group)
    wanted = describe(group["instance_type"]).architecture
    if describe(system_type).architecture != wanted:
        example = "m5.large" if wanted == Architecture.X86_64 else "m7g.large"
        raise ConfigError(
            layout.system_key("system_instance_type"),
            system_type,
            f"the job's data preparation and evaluation run on the system nodes in its {wanted.value} image: use an "
            f"{wanted.value} system type such as {example}, or set job.prepareData and job.evaluate to false",
        )


def _image(top: Mapping[str, Any], platform_args: TrainingPlatformArgs) -> str | None:
    """`eks-ddp:image`, which a cluster given by kubeconfig needs: no image is built in ECR for it."""
    image = top.get("image") or None
    existing = platform_args.get("existing_cluster")
    if image is None and existing is not None and aws_side_problem(existing):
        raise ConfigError(
            key("image"), None, "the cluster is given by kubeconfig, so no image is built in ECR: give the image "
            "its nodes pull (trainer/Dockerfile built and pushed where they reach it)"
        )
    return image


def _job(top: Mapping[str, Any], platform_args: TrainingPlatformArgs, image: str | None, describe: Describe,
         layout: Layout, operator: OperatorKind) -> JobSettings | None:
    """The job on the groups the platform reaches, its steps on the system nodes, and its operator's limits."""
    job = _read_job(
        top.get("job"), platform.reachable_groups(platform_args), describe,
        fixed=platform.keeps_desired_size(platform_args),
        namespace=platform_args.get("training_namespace", DEFAULT_NAMESPACE), image=image or BUILT_IMAGE,
        shared=platform_args.get("storage") != StorageKind.NONE,
    )
    if job is None:
        return None
    if job.prepare_data or job.evaluate:
        _side_steps_fit_system_nodes(platform_args, job, describe, layout)
    if platform_args.get("node_health") is False:
        job = replace(job, spec={**job.spec, "preflight": False})
    if job.resolved.elastic and operator != OperatorKind.V1:
        raise ConfigError(
            job_key("elastic_min_replicas"),
            job.resolved.elastic_min_replicas,
            f"elastic jobs need trainingOperator v1 (PyTorchJob elasticPolicy), not {operator.value}",
        )
    return job


def parse(
    values: Mapping[str, Any], region: str | None, describe: Describe = instance_facts.offline, project: Path = ROOT
) -> StackConfig:
    """Typed stack configuration from the `eks-ddp:*` values (keys without the project prefix).

    `describe` gives an instance type's facts: the catalogue's (or a stated guess) offline, EC2's in
    `pulumi up` (`__main__.py` passes infra.facts.instance_facts.describe). `project` is the folder of the
    Pulumi.yaml that declares the keys.
    """
    top = read(dict(values), PROJECT, top_level(project))
    region = _region(region)
    platform_args, layout, group_images = read_platform(top, region, describe)
    operator = choice("trainingOperator", top.get("training_operator") or OperatorKind.V1.value, OperatorKind)
    platform_args["training_operator"] = operator
    image = _image(top, platform_args)
    describe = facts_for(platform_args.get("existing_cluster"), describe)
    job = _job(top, platform_args, image, describe, layout, operator)
    return StackConfig(
        region=region,
        platform=platform_args,
        job=job,
        image_uri=image,
        group_images=group_images,
        fabric_check=choice("fabricCheck", top.get("fabric_check") or FabricCheck.GATE.value, FabricCheck),
        fabric_check_image=top.get("fabric_check_image") or None,
        nccl_check=top.get("nccl_check", True),
        nccl_check_image=top.get("nccl_check_image") or None,
        operator=operator,
    )


def from_pulumi(program: Path) -> StackConfig:
    """The settings `pulumi up` gives the program in `program` (its Pulumi.yaml's folder): every key it passed must be
    declared there (a misspelled one is refused), each is read as its declared type, the stack files' example ids are
    refused before anything is created, and instance types are described by EC2 (any type works, sized as EC2 says)."""
    config, declared = pulumi.Config(), project_config.declarations(program)
    project_config.check_declared(pulumi.get_stack(), project_config.configured_keys(), declared)
    readers = {"string": config.get, "integer": config.get_int, "boolean": config.get_bool}
    values = {name: readers.get(spec.get("type", ""), config.get_object)(name) for name, spec in declared.items()}
    configured = {name: value for name, value in values.items() if value is not None}
    placeholders.refuse(configured, f"{PROJECT}:")
    return parse(configured, pulumi.Config("aws").get("region"), instance_facts.describe, program)
