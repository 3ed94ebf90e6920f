"""The eks-ddp stack: config -> typed objects -> TrainingPlatform + workloads -> exports."""

import pulumi

from stack.config import parse
from stack.program import build

config = pulumi.Config()
STRUCTURED = ("vpc", "nodeGroups", "storage", "job", "adminPrincipalArns")
values = {key: config.get_object(key) for key in STRUCTURED}
values |= {key: config.get(key) for key in ("clusterName", "kubernetesVersion", "image", "fabricCheckImage", "trainingNamespace")}
values |= {"fabricCheck": config.get_bool("fabricCheck"), "checkpointExpiryDays": config.get_int("checkpointExpiryDays")}
settings = parse({key: value for key, value in values.items() if value is not None}, pulumi.Config("aws").get("region"))
deployed = build(settings, name=pulumi.get_project())

platform = deployed.platform
pulumi.export("kubeconfig", platform.kubeconfig)
pulumi.export("clusterName", platform.cluster_name)
pulumi.export("trainingNamespace", platform.training_namespace)
pulumi.export("imageUri", deployed.image.image_uri)
pulumi.export("updateKubeconfig", f"aws eks update-kubeconfig --name {platform.cluster_name} --region {settings.region}")
if platform.bucket_name is not None:
    pulumi.export("bucketName", platform.bucket_name)
if settings.job is not None:
    job, namespace = settings.job.job.name, platform.training_namespace
    pulumi.export("watchJob", f"kubectl -n {namespace} get pytorchjob {job} -w")
    pulumi.export("jobLogs", f"kubectl -n {namespace} logs -f {job}-master-0")
    pulumi.export("evaluation", f"kubectl -n {namespace} logs job/{job}-evaluate")
