"""The eks-ddp stack: config -> typed objects -> TrainingPlatform + workloads -> exports."""

from pathlib import Path

import pulumi

from eks_ddp.infra.facts import instance_facts
from eks_ddp.stack import placeholders
from eks_ddp.stack.config import parse
from eks_ddp.stack.program import build, job_commands
from eks_ddp.stack.project_config import PROJECT, check_declared, configured_keys, declarations

config = pulumi.Config()
declared = declarations(Path(__file__).resolve().parent)  # this program's Pulumi.yaml
# Every key the CLI passed (it applies Pulumi.yaml's defaults and type checks first): a misspelled one is refused.
check_declared(pulumi.get_stack(), configured_keys(), declared)
readers = {"string": config.get, "integer": config.get_int, "boolean": config.get_bool}
values = {key: readers.get(spec.get("type", ""), config.get_object)(key) for key, spec in declared.items()}
configured = {key: value for key, value in values.items() if value is not None}
placeholders.refuse(configured, f"{PROJECT}:")  # the stack files' example ids, before anything is created
# Instance facts from EC2: any type works, and sizing follows what EC2 says it has.
settings = parse(configured, pulumi.Config("aws").get("region"), describe=instance_facts.describe)
deployed = build(settings, name=PROJECT)

platform = deployed.platform
pulumi.export("kubeconfig", platform.kubeconfig)
pulumi.export("clusterName", platform.cluster_name)
pulumi.export("trainingNamespace", platform.training_namespace)
pulumi.export("images", deployed.images)
if platform.cluster_name:  # an EKS cluster's (a cluster given by kubeconfig has none)
    pulumi.export(
        "updateKubeconfig", f"aws eks update-kubeconfig --name {platform.cluster_name} --region {settings.region}"
    )
if platform.bucket_name is not None:
    pulumi.export("bucketName", platform.bucket_name)
if settings.job is not None:
    job, namespace = settings.job.job.name, platform.training_namespace
    watch, logs = job_commands(settings.operator, job, namespace)
    pulumi.export("watchJob", watch)
    pulumi.export("jobLogs", logs)
    if deployed.job is not None:
        pulumi.export("runName", deployed.job.run_name)
        pulumi.export("runDirectory", deployed.job.output_dir)
    if settings.job.prepare_data:
        pulumi.export("watchData", f"kubectl -n {namespace} logs -f job/{job}-data")
    if settings.job.evaluate:
        pulumi.export("evaluation", f"kubectl -n {namespace} logs -f job/{job}-evaluate")
