"""Every stack key reaches its argument, each default is the one Pulumi.yaml and the docs promise, and each
component's refusal names the stack key the user wrote (stack/config.py's parse, in this process).

The expectations are written out, not derived from the code's tables: a key that lands under another name, a default
that drifts or a message that names the wrong key fails here.
"""

from typing import Any

import pytest

from eks_ddp.infra.addons.kueue import QueueTopology
from eks_ddp.infra.addons.training_operator import OperatorKind
from eks_ddp.infra.aws.iam import RoleAccess
from eks_ddp.infra.platform import AutoscalerKind, MonitoringKind, StorageKind
from eks_ddp.stack.config import BUILT_IMAGE, ConfigError, FabricCheck, JobSettings, parse

ARM_GROUP = {"name": "trainers", "instanceType": "c7gn.16xlarge", "availabilityZone": "us-west-2b"}

EVERY_KEY = {
    "clusterName": "lab",
    "kubernetesVersion": "1.34",
    "adminPrincipalArns": ["arn:aws:iam::123456789012:role/admin"],
    "trainingNamespace": "research",
    "checkpointExpiryDays": 14,
    "serviceAccountRoles": "pod-identity",
    "addons": {"efaDevicePlugin": False, "nvidiaDevicePlugin": False, "neuronDevicePlugin": False,
               "metricsServer": False, "fsxCsiDriver": True, "trainingOperator": "/charts/training-operator",
               "kueue": "/charts/kueue"},
    "modelBucket": False,
    "vpc": {"cidr": "10.1.0.0/16", "availabilityZones": ["us-west-2a", "us-west-2b"], "natGateways": "one_per_zone"},
    "nodeGroups": [
        {"name": "system", "instanceType": "m7g.xlarge", "desiredSize": 3},
        {**ARM_GROUP, "efa": True, "minSize": 0, "maxSize": 4, "desiredSize": 0, "capacityType": "SPOT",
         "labels": {"team": "ml"}, "taints": [{"key": "training", "value": "yes", "effect": "NoSchedule"}],
         "rootVolumeGiB": 300, "releaseVersion": "1.34.2-20260601", "image": "ecr/trainer:arm"},
    ],
    "storage": {"kind": "fsx", "deploymentType": "SCRATCH_2", "capacityGiB": 2400, "s3ImportPath": "s3://data/in",
                "s3ExportPath": "s3://data/out"},
    "job": {"name": "cifar", "nodeGroup": "trainers", "dataset": "cifar10", "epochs": 3, "batchSize": 60,
            "replicas": 4, "elasticMinReplicas": 2, "prepareData": False, "evaluate": False, "survivesNodeLosses": 2},
    "trainingOperator": "v1",
    "autoscaler": "karpenter",
    "monitoring": "prometheus",
    "efaExporterImage": "ecr/efa:1",
    "nodeHealth": False,
    "karpenterNodeRepair": True,
    "managedPrometheus": True,
    "image": "ecr/trainer:1",
    "fabricCheck": "report",
    "fabricCheckImage": "ecr/fabric:1",
    "ncclCheck": False,
    "ncclCheckImage": "ecr/nccl:1",
    "queueing": "kueue",
    "queueQuotas": {"vision": {"trainers": {"cpu": "64"}}},
    "queueTopology": "off",
    "queuePodsReadyTimeout": "5m",
}


def test_every_key_reaches_its_argument() -> None:
    config = parse(EVERY_KEY, "us-west-2")
    assert config.platform == {
        "cluster_name": "lab",
        "kubernetes_version": "1.34",
        "admin_principal_arns": ["arn:aws:iam::123456789012:role/admin"],
        "training_namespace": "research",
        "checkpoint_expiry_days": 14,
        "service_account_roles": RoleAccess.POD_IDENTITY,
        "efa_device_plugin": False,
        "nvidia_device_plugin": False,
        "neuron_device_plugin": False,
        "metrics_server": False,
        "fsx_csi_driver": True,
        "addon_sources": {"training_operator": "/charts/training-operator", "kueue": "/charts/kueue"},
        "model_bucket": False,
        "network": {"cidr": "10.1.0.0/16", "availability_zones": ["us-west-2a", "us-west-2b"],
                    "nat_gateways": "one_per_zone"},
        "system_instance_type": "m7g.xlarge",
        "system_node_count": 3,
        "node_groups": [{
            "name": "trainers", "instance_type": "c7gn.16xlarge", "availability_zone": "us-west-2b", "efa": True,
            "min_size": 0, "max_size": 4, "desired_size": 0, "capacity_type": "SPOT", "labels": {"team": "ml"},
            "taints": [{"key": "training", "value": "yes", "effect": "NoSchedule"}], "root_volume_gib": 300,
            "release_version": "1.34.2-20260601",
        }],
        "storage": StorageKind.FSX,
        "fsx": {"deployment_type": "SCRATCH_2", "capacity_gib": 2400, "s3_import_path": "s3://data/in",
                "s3_export_path": "s3://data/out"},
        "tags": {"project": "eks-ddp"},
        "training_operator": OperatorKind.V1,
        "autoscaler": AutoscalerKind.KARPENTER,
        "monitoring": MonitoringKind.PROMETHEUS,
        "efa_exporter_image": "ecr/efa:1",
        "node_health": False,
        "karpenter_node_repair": True,
        "managed_prometheus": True,
        "queueing": {"quotas": {"vision": {"trainers": {"cpu": "64"}}}, "topology": QueueTopology.OFF,
                     "pods_ready_timeout": "5m"},
    }
    assert config.job == JobSettings(
        node_group="trainers",
        spec={"name": "cifar", "namespace": "research", "image": "ecr/trainer:1", "dataset": "cifar10", "epochs": 3,
              "batch_size": 60, "replicas": 4, "elastic_min_replicas": 2, "node_losses": 2,
              "preflight": False},  # eks-ddp:nodeHealth false: no node-health check before training
        prepare_data=False,
        evaluate=False,
    )
    assert (config.region, config.image_uri, config.group_images) == ("us-west-2", "ecr/trainer:1",
                                                                      {"trainers": "ecr/trainer:arm"})
    assert (config.fabric_check, config.fabric_check_image) == (FabricCheck.REPORT, "ecr/fabric:1")
    assert (config.nccl_check, config.nccl_check_image, config.operator) == (False, "ecr/nccl:1", OperatorKind.V1)


SUBNETS = {"us-west-2a": "subnet-a", "us-west-2b": "subnet-b"}
FILE_SYSTEM = "fs-0123456789abcdef0"
DNS_NAME = f"{FILE_SYSTEM}.fsx.us-west-2.amazonaws.com"
OWN_CODE_ON_AN_EXISTING_VPC = {
    "vpc": {"existingVpcId": "vpc-0123", "existingPrivateSubnetIds": SUBNETS, "existingPublicSubnetIds": ["subnet-p"]},
    "nodeGroups": [
        {"name": "cpu", "instanceType": "m5.large", "efa": False, "maxSize": 3, "desiredSize": 1,
         "availabilityZone": "us-west-2a"}
    ],
    "storage": {"kind": "existing-fsx", "fileSystemId": FILE_SYSTEM, "dnsName": DNS_NAME,
                "mountName": "abcdefgh", "securityGroupId": "sg-0123456789abcdef0", "capacityGiB": 1200},
    "serviceAccountRoles": "irsa",
    "autoscaler": "none",
    "trainingOperator": "v2",
    "fabricCheck": "off",
    "image": "ecr/own:1",
    "job": {"name": "own", "nodeGroup": "cpu", "replicas": 1, "script": "train.py", "args": ["--epochs", "3"],
            "env": {"LOG_LEVEL": "info"}},
}


def test_an_existing_vpc_and_file_system_and_the_user_s_own_code() -> None:
    config = parse(OWN_CODE_ON_AN_EXISTING_VPC, "us-west-2")
    platform: dict[str, Any] = dict(config.platform)
    assert platform["network"] == {
        "existing_vpc_id": "vpc-0123", "existing_private_subnet_ids": SUBNETS,
        "existing_public_subnet_ids": ["subnet-p"],
    }
    assert platform["storage"] == StorageKind.EXISTING_FSX and "fsx" not in platform
    assert platform["existing_fsx"] == {
        "file_system_id": FILE_SYSTEM, "dns_name": DNS_NAME, "mount_name": "abcdefgh",
        "security_group_id": "sg-0123456789abcdef0", "capacity_gib": 1200,
    }
    assert platform["service_account_roles"] == RoleAccess.IRSA
    assert (platform["autoscaler"], platform["training_operator"]) == (AutoscalerKind.NONE, OperatorKind.V2)
    assert platform["monitoring"] == MonitoringKind.PROMETHEUS, "a stack with a job is watched unless it says not"
    assert config.job == JobSettings(
        node_group="cpu",
        spec={"name": "own", "namespace": "training", "image": "ecr/own:1", "replicas": 1,
              "code": {"script": "train.py", "args": ["--epochs", "3"], "env": {"LOG_LEVEL": "info"}}},
        prepare_data=False,  # its own script prepares what it needs
        evaluate=False,
    )
    assert config.fabric_check == FabricCheck.OFF and config.checked_group(gpu=False) is None
    assert config.operator == OperatorKind.V2


def test_an_existing_cluster_takes_its_kubeconfig_and_no_vpc() -> None:
    config = parse({"existingCluster": {"kubeconfig": "~/.kube/lab", "context": "lab"},
                    "nodeGroups": [{"name": "gpu", "instanceType": "g5.xlarge", "efa": False, "maxSize": 2}],
                    "autoscaler": "none", "storage": {"kind": "none"}, "modelBucket": False, "nodeHealth": False,
                    "image": "ecr/trainer:gpu"},
                   "us-west-2")
    assert config.platform.get("existing_cluster") == {"kubeconfig": "~/.kube/lab", "context": "lab"}
    assert "network" not in config.platform and config.platform.get("node_groups") == [
        {"name": "gpu", "instance_type": "g5.xlarge", "efa": False, "max_size": 2}
    ]


def test_a_stack_that_sets_nothing_gets_the_documented_defaults() -> None:
    """Pulumi.yaml's defaults (docs/deploy.md's key table): a /16 in the region's first two zones, FSx scratch storage,
    the Cluster Autoscaler, training-operator v1, node health on, no monitoring without a job, the fabric check gating
    and the NCCL check on; nothing else set."""
    config = parse({"nodeGroups": [ARM_GROUP]}, "us-west-2")
    assert config.platform == {
        "network": {"cidr": "10.0.0.0/16", "availability_zones": ["us-west-2a", "us-west-2b"]},
        "node_groups": [{"name": "trainers", "instance_type": "c7gn.16xlarge", "availability_zone": "us-west-2b"}],
        "tags": {"project": "eks-ddp"},
        "monitoring": MonitoringKind.NONE,
        "storage": StorageKind.FSX,
        "fsx": {},
        "training_operator": OperatorKind.V1,
    }
    assert config.job is None and config.image_uri is None and config.group_images == {}
    assert (config.fabric_check, config.fabric_check_image) == (FabricCheck.GATE, None)
    assert (config.nccl_check, config.nccl_check_image, config.operator) == (True, None, OperatorKind.V1)


PROJECT_DEFAULTS_MEAN_UNSET = {"clusterName": "", "kubernetesVersion": "", "trainingNamespace": "",
                               "checkpointExpiryDays": 0, "existingCluster": {}, "addons": {}, "job": {}, "image": "",
                               "queueQuotas": {}, "fabricCheckImage": "", "ncclCheckImage": ""}


def test_the_values_pulumi_yaml_gives_as_defaults_mean_unset() -> None:
    """What the CLI passes for a key the stack file leaves out is Pulumi.yaml's default: the same as no value."""
    groups = {"nodeGroups": [ARM_GROUP]}
    assert parse(PROJECT_DEFAULTS_MEAN_UNSET | groups, "us-west-2") == parse(groups, "us-west-2")


def test_a_job_gets_its_documented_defaults() -> None:
    config = parse({"nodeGroups": [ARM_GROUP | {"maxSize": 2}], "job": {"nodeGroup": "trainers"}}, "us-west-2")
    assert config.job == JobSettings(
        node_group="trainers",
        spec={"name": "mnist-ddp", "namespace": "training", "image": BUILT_IMAGE},  # the rest: the job's defaults
        prepare_data=True,  # mnist is downloaded, onto the shared volume
        evaluate=True,
    )
    assert config.job is not None
    job = config.job.resolved
    assert (job.dataset, job.epochs, job.batch_size, job.replicas, job.node_losses) == ("mnist", 10, 128, 2, 1)
    assert (job.claim_name, job.service_account) == ("shared", "trainer")
    assert config.platform.get("monitoring") == MonitoringKind.PROMETHEUS


@pytest.mark.parametrize(("storage", "prepare"), [({"kind": "none"}, False), ({"kind": "efs"}, True)])
def test_data_is_prepared_only_where_the_pods_share_a_volume(storage: dict[str, str], prepare: bool) -> None:
    values = {"nodeGroups": [ARM_GROUP | {"maxSize": 2}], "job": {"nodeGroup": "trainers"}, "storage": storage}
    job = parse(values, "us-west-2").job
    assert job is not None and job.prepare_data is prepare
    assert job.resolved.claim_name == ("shared" if prepare else None)


def _refusal(values: dict[str, Any], region: str | None = "us-west-2") -> str:
    with pytest.raises(ConfigError) as raised:
        parse(values, region)
    assert str(raised.value).startswith(f"{raised.value.key}: "), "ConfigError.key is not the key the message names"
    return str(raised.value)


GROUP = ARM_GROUP | {"maxSize": 4}
X86_GROUP = {"name": "cpu", "instanceType": "m5.2xlarge", "availabilityZone": "us-west-2a", "efa": False}


def _stack(**changes: Any) -> dict[str, Any]:
    """A stack with one arm64 group and a job on it, with `changes`: job_<key> sets a job key, group_<key> a group
    key, any other a top-level key."""
    values: dict[str, Any] = {"nodeGroups": [dict(GROUP)], "job": {"nodeGroup": "trainers"}}
    for name, value in changes.items():
        if name.startswith("job_"):
            values["job"][name.removeprefix("job_")] = value
        elif name.startswith("group_"):
            values["nodeGroups"][0][name.removeprefix("group_")] = value
        else:
            values[name] = value
    return values


OWN_CODE = {"job_script": "train.py", "image": "ecr/own:1"}
NOT_KUEUE = "is not allowed; it sets Kueue's queues: add eks-ddp:queueing kueue"
JOB_KEY_WITH_OWN_CODE = "it runs the bundled trainer: a job with its own script prepares and evaluates in that script"
REFUSALS = {
    "a section that is not a map": (_stack(storage="fsx"), "eks-ddp:storage: 'fsx' is not allowed; give a map"),
    "an unknown key, with the one meant": (
        _stack(clusterNme="x"),
        "eks-ddp:clusterNme: 'x' is not allowed; known keys are addons, adminPrincipalArns, autoscaler, … "
        "trainingOperator, vpc (did you mean clusterName?)",
    ),
    "a string for a boolean": (_stack(nodeHealth="yes"), "eks-ddp:nodeHealth: 'yes' is not allowed; give true or "
                               "false (unquoted)"),
    "no region": ((_stack(), None), "aws:region: None is not allowed; set the AWS region, e.g. `pulumi config set "
                  "aws:region us-east-1`"),
    "a misspelt region": (
        (_stack(), "us-west-9"),
        "aws:region: 'us-west-9' is not allowed; no AWS region of that name; did you mean us-west-2, us-west-1, "
        "us-east-2?",
    ),
    "no region of that name": ((_stack(), "mars"), "aws:region: 'mars' is not allowed; no AWS region of that name; "
                               "use one of af-south-1, ap-east-1, … us-isof-east-1, us-isof-south-1"),
    "a zone of another region": (
        _stack(vpc={"availabilityZones": ["us-east-1a"]}),
        "eks-ddp:vpc.availabilityZones: 'us-east-1a' is not allowed; not a zone of aws:region us-west-2: use "
        "us-west-2a, us-west-2b, ...",
    ),
    "a subnet in a zone of another region": (
        _stack(vpc={"existingVpcId": "vpc-1", "existingPrivateSubnetIds": {"eu-west-1a": "subnet-a"}}),
        "eks-ddp:vpc.existingPrivateSubnetIds: 'eu-west-1a' is not allowed; not a zone of aws:region us-west-2: use "
        "us-west-2a, us-west-2b, ...",
    ),
    "a subnet id that is not a string": (
        _stack(vpc={"existingVpcId": "vpc-1", "existingPrivateSubnetIds": {"us-west-2b": 5}}),
        "eks-ddp:vpc.existingPrivateSubnetIds.us-west-2b: 5 is not allowed; give a string",
    ),
    "a group in a VPC with no zones": (
        _stack(vpc={"existingVpcId": "vpc-1", "existingPrivateSubnetIds": {}}),
        "eks-ddp:nodeGroups[0].availabilityZone: 'us-west-2b' is not allowed; use one of "
        "eks-ddp:vpc.availabilityZones (none named)",
    ),
    "a label that is not a string": (_stack(group_labels={"team": 5}),
                                     "eks-ddp:nodeGroups[0].labels.team: 5 is not allowed; give a string"),
    "a taint's unknown key": (
        _stack(group_taints=[{"key": "a", "colour": "b"}]),
        "eks-ddp:nodeGroups[0].taints[0].colour: 'b' is not allowed; known keys are effect, key, value",
    ),
    "a storage kind": (_stack(storage={"kind": "nfs"}),
                       "eks-ddp:storage.kind: 'nfs' is not allowed; use fsx, existing-fsx, efs, none"),
    "a storage key of another kind": (
        _stack(storage={"kind": "efs", "capacityGiB": 1200}),
        "eks-ddp:storage.capacityGiB: 1200 is not allowed; it applies to kind fsx or existing-fsx, not efs",
    ),
    "quotas without Kueue": (_stack(queueQuotas={"a": {}}), f"eks-ddp:queueQuotas: {{'a': {{}}}} {NOT_KUEUE}"),
    "a topology without Kueue": (_stack(queueTopology="required"), f"eks-ddp:queueTopology: 'required' {NOT_KUEUE}"),
    "a timeout without Kueue": (_stack(queuePodsReadyTimeout="5m"), f"eks-ddp:queuePodsReadyTimeout: '5m' {NOT_KUEUE}"),
    "a queueing": (_stack(queueing="volcano"), "eks-ddp:queueing: 'volcano' is not allowed; use one of none, kueue"),
    "a topology": (_stack(queueing="kueue", queueTopology="ring"),
                   "eks-ddp:queueTopology: 'ring' is not allowed; use one of required, preferred, off"),
    "a monitoring": (_stack(monitoring="datadog"),
                     "eks-ddp:monitoring: 'datadog' is not allowed; use one of none, prometheus, cloudwatch"),
    "an autoscaler": (_stack(autoscaler="keda"),
                      "eks-ddp:autoscaler: 'keda' is not allowed; use one of cluster-autoscaler, karpenter, none"),
    "an operator": (_stack(trainingOperator="v3"),
                    "eks-ddp:trainingOperator: 'v3' is not allowed; use one of v1, v2, none"),
    "a fabric check": (_stack(fabricCheck="maybe"),
                       "eks-ddp:fabricCheck: 'maybe' is not allowed; use one of gate, report, off"),
    "service account roles": (_stack(serviceAccountRoles="keys"),
                              "eks-ddp:serviceAccountRoles: 'keys' is not allowed; use one of pod-identity, irsa"),
    "managed Prometheus without Prometheus": (
        _stack(managedPrometheus=True, monitoring="none"),
        "eks-ddp:managedPrometheus: True is not allowed; it writes Prometheus' samples: needs eks-ddp:monitoring "
        "prometheus, not none",
    ),
    "an admin that is not a string": (_stack(adminPrincipalArns=[1]),
                                      "eks-ddp:adminPrincipalArns[0]: 1 is not allowed; give a string"),
    "a job name": (_stack(job_name="Bad_Name"), "eks-ddp:job.name: 'Bad_Name' is not allowed; must be a DNS-1035 "
                   "label (lowercase letters, digits and '-', starting with a letter)"),
    "a job's group": (_stack(job_nodeGroup="gpus"),
                      "eks-ddp:job.nodeGroup: 'gpus' is not allowed; use one of the node groups: system, trainers"),
    "a dataset": (_stack(job_dataset="imagenet"),
                  "eks-ddp:job.dataset: 'imagenet' is not allowed; use one of digits, mnist, cifar10, synthetic"),
    "0 epochs": (_stack(job_epochs=0), "eks-ddp:job.epochs: 0 is not allowed; use a whole number >= 1"),
    "a batch of 0": (_stack(job_batchSize=0), "eks-ddp:job.batchSize: 0 is not allowed; use a whole number >= 1"),
    "0 replicas": (_stack(job_replicas=0), "eks-ddp:job.replicas: 0 is not allowed; use a whole number >= 1"),
    "a group too small for a training pod": (
        _stack(group_instanceType="t3.nano", group_efa=False),
        "eks-ddp:job.nodeGroup: 'trainers' is not allowed; t3.nano (2 vCPUs, 0.5 GiB) leaves no whole CPU and GiB "
        "for a training pod after … use a type with at least 2 vCPUs and 4 GiB",
    ),
    "more replicas than maxSize": (
        _stack(job_replicas=5),
        "eks-ddp:job.replicas: 5 is not allowed; node group trainers holds at most 4 pods, one per node",
    ),
    "more replicas than a fixed group's nodes": (
        _stack(job_replicas=3, group_desiredSize=2, autoscaler="none"),
        "eks-ddp:job.replicas: 3 is not allowed; node group trainers keeps its desiredSize=2 nodes, one pod each "
        "(eks-ddp:autoscaler none adds none)",
    ),
    "11 node losses": (_stack(job_survivesNodeLosses=11),
                       "eks-ddp:job.survivesNodeLosses: 11 is not allowed; use 0 to 10 node losses"),
    "-1 node losses": (_stack(job_survivesNodeLosses=-1),
                       "eks-ddp:job.survivesNodeLosses: -1 is not allowed; use 0 to 10 node losses"),
    "an elastic minimum of 0": (_stack(job_elasticMinReplicas=0),
                                "eks-ddp:job.elasticMinReplicas: 0 is not allowed; use 1 to replicas (2)"),
    "an elastic minimum above replicas": (_stack(job_elasticMinReplicas=3),
                                          "eks-ddp:job.elasticMinReplicas: 3 is not allowed; use 1 to replicas (2)"),
    "an elastic range that cannot share the batch": (
        _stack(job_replicas=4, job_batchSize=10, job_elasticMinReplicas=2),
        "eks-ddp:job.elasticMinReplicas: 2 is not allowed; 3 pods cannot share the job's global batch (10 per pod "
        "x 4 pods) evenly; use 4 or more, or a batch size that 3 pods can share",
    ),
    "an elastic job under v2": (
        _stack(job_elasticMinReplicas=1, trainingOperator="v2"),
        "eks-ddp:job.elasticMinReplicas: 1 is not allowed; elastic jobs need trainingOperator v1 (PyTorchJob "
        "elasticPolicy), not v2",
    ),
    "data preparation without a shared volume": (
        _stack(job_prepareData=True, storage={"kind": "none"}),
        "eks-ddp:job.prepareData: True is not allowed; it fills the shared volume, and eks-ddp:storage is none: each "
        "pod fetches the data into its scratch space itself",
    ),
    "preparing a dataset that is not downloaded": (
        _stack(job_prepareData=True, job_dataset="digits"),
        "eks-ddp:job.prepareData: True is not allowed; only mnist, cifar10 are downloaded; digits is not",
    ),
    "the bundled trainer on Neuron devices": (
        _stack(group_instanceType="trn1.32xlarge"),
        "eks-ddp:job.script: None is not allowed; node group trainers has 16 Neuron devices (trn1.32xlarge), which "
        "the bundled trainer does not run on: give your Neuron training code, in an image with the Neuron SDK",
    ),
    "a script in the image the stack builds": (
        _stack(job_script="t.py"),
        "eks-ddp:job.script: 't.py' is not allowed; it runs in your own image: set eks-ddp:image to an image that "
        "contains it (the image the stack builds holds only the bundled trainer)",
    ),
    "args without a script": (_stack(job_args=["a"]), "eks-ddp:job.args: ['a'] is not allowed; it goes with "
                              "job.script: set job.script too"),
    "env without a script": (_stack(job_env={"A": "b"}), "eks-ddp:job.env: {'A': 'b'} is not allowed; it goes with "
                             "job.script: set job.script too"),
    "an environment value that is not a string": (_stack(**OWN_CODE, job_env={"A": 1}),
                                                  "eks-ddp:job.env.A: 1 is not allowed; give a string"),
    "an argument that is not a string": (_stack(**OWN_CODE, job_args=[1]),
                                         "eks-ddp:job.args[0]: 1 is not allowed; give a string"),
    "a script that names nothing": (
        _stack(**{**OWN_CODE, "job_script": "-m"}),
        "eks-ddp:job.script: '-m' is not allowed; name a Python file in the image, or -m and a module",
    ),
    "an environment variable the engines set": (
        _stack(**OWN_CODE, job_env={"RANK": "0"}),
        "eks-ddp:job.env: {'RANK': '0'} is not allowed; RANK are set by the engines, torchrun or the pod: use other "
        "names",
    ),
    "data preparation with the user's code": (
        _stack(**OWN_CODE, job_prepareData=True),
        f"eks-ddp:job.prepareData: True is not allowed; {JOB_KEY_WITH_OWN_CODE}; leave it unset",
    ),
    "evaluation with the user's code": (
        _stack(**OWN_CODE, job_evaluate=True, storage={"kind": "none"}),
        f"eks-ddp:job.evaluate: True is not allowed; {JOB_KEY_WITH_OWN_CODE}; leave it unset",
    ),
    "x86 system nodes for an arm64 job's side steps": (
        _stack(nodeGroups=[{"name": "system", "instanceType": "m5.large"}, GROUP]),
        "eks-ddp:nodeGroups[0].instanceType: 'm5.large' is not allowed; the job's data preparation and evaluation run "
        "on the system nodes in its arm64 image: use an arm64 system type such as m7g.large, or set job.prepareData "
        "and job.evaluate to false",
    ),
    "the default arm64 system nodes for an x86 job's side steps": (
        _stack(nodeGroups=[X86_GROUP], job_nodeGroup="cpu"),
        "eks-ddp:nodeGroups.instanceType: 'm7g.large' is not allowed; the job's data preparation and evaluation run "
        "on the system nodes in its x86_64 image: use an x86_64 system type such as m5.large, or set job.prepareData "
        "and job.evaluate to false",
    ),
    "a group that is not a map": (_stack(nodeGroups=["x"]), "eks-ddp:nodeGroups[0]: 'x' is not allowed; give a map"),
    "a group without a name": (
        _stack(nodeGroups=[{k: v for k, v in GROUP.items() if k != "name"}]),
        "eks-ddp:nodeGroups[0].name: '' is not allowed; use a DNS label of at most 30 characters",
    ),
    "the system group's unknown key": (
        _stack(nodeGroups=[{"name": "system", "instanceType": "m7g.large", "colour": 1}, GROUP]),
        "eks-ddp:nodeGroups[0].colour: 1 is not allowed; known keys are desiredSize, instanceType, name",
    ),
    "storage's unknown key": (_stack(storage={"kind": "fsx", "colour": 1}), "eks-ddp:storage.colour: 1 is not "
                              "allowed; known keys are capacityGiB, … s3ImportPath, securityGroupId"),
    "an unknown add-on": (_stack(addons={"colour": True}), "eks-ddp:addons.colour: True is not allowed; known keys "
                          "are efaDevicePlugin, … nvidiaDevicePlugin, trainingOperator"),
    "the VPC's unknown key": (_stack(vpc={"colour": 1}), "eks-ddp:vpc.colour: 1 is not allowed; known keys are "
                              "availabilityZones, cidr, … existingVpcId, natGateways"),
    "a zone that is not a string": (_stack(vpc={"availabilityZones": [1, "us-west-2a"]}),
                                    "eks-ddp:vpc.availabilityZones[0]: 1 is not allowed; give a string"),
    "an empty region": ((_stack(), ""), "aws:region: '' is not allowed; set the AWS region, e.g. `pulumi config set "
                        "aws:region us-east-1`"),
    "more replicas than the default maxSize": (
        _stack(nodeGroups=[{k: v for k, v in GROUP.items() if k != "maxSize"}], job_replicas=3),
        "eks-ddp:job.replicas: 3 is not allowed; node group trainers holds at most 2 pods, one per node",
    ),
    "evaluation alone on system nodes of the other architecture": (
        _stack(nodeGroups=[X86_GROUP], job_nodeGroup="cpu", job_prepareData=False, job_evaluate=True),
        "eks-ddp:nodeGroups.instanceType: 'm7g.large' is not allowed; the job's data preparation and evaluation run "
        "on the system nodes in its x86_64 image: … or set job.prepareData and job.evaluate to false",
    ),
    "data preparation alone on system nodes of the other architecture": (
        _stack(nodeGroups=[X86_GROUP], job_nodeGroup="cpu", job_prepareData=True, job_evaluate=False),
        "eks-ddp:nodeGroups.instanceType: 'm7g.large' is not allowed; the job's data preparation and evaluation run "
        "on the system nodes in its x86_64 image: … or set job.prepareData and job.evaluate to false",
    ),
    "a cluster given by kubeconfig, without an image": (
        {"existingCluster": {"kubeconfig": "~/.kube/c"}, "nodeGroups": [X86_GROUP], "storage": {"kind": "none"},
         "modelBucket": False, "nodeHealth": False, "autoscaler": "none"},
        "eks-ddp:image: None is not allowed; the cluster is given by kubeconfig, so no image is built in ECR: give the "
        "image its nodes pull (trainer/Dockerfile built and pushed where they reach it)",
    ),
}


@pytest.mark.parametrize(("case", "message"), REFUSALS.values(), ids=list(REFUSALS))
def test_a_bad_value_is_refused_naming_its_key_the_value_and_what_is_allowed(case: Any, message: str) -> None:
    """The whole line (a long list elided with … in the expectation: its ends must match)."""
    values, region = case if isinstance(case, tuple) else (case, "us-west-2")
    refusal = _refusal(values, region)
    start, _, end = message.partition(" … ")
    assert refusal.startswith(start) and refusal.endswith(end) if end else refusal == message, refusal


KUBECONFIG_CLUSTER = {"existingCluster": {"kubeconfig": "~/.kube/c"}, "nodeGroups": [X86_GROUP],
                      "storage": {"kind": "none"}, "modelBucket": False, "nodeHealth": False, "autoscaler": "none",
                      "image": "ecr/trainer:1"}
SYSTEM = {"name": "system", "instanceType": "m7g.large"}
NOT_IN_AWS = "it makes resources in AWS, and the cluster is given by kubeconfig, so nothing is made in AWS"
COMPONENT_REFUSALS = {
    "a group's key": (_stack(group_rootVolumeGiB=1),
                      "eks-ddp:nodeGroups[0].rootVolumeGiB: 1 is not allowed; use 20 to 16384 GiB"),
    "a group's key after the system group": (
        _stack(nodeGroups=[SYSTEM, GROUP | {"capacityType": "CHEAP"}]),
        "eks-ddp:nodeGroups[1].capacityType: 'CHEAP' is not allowed; use one of ['ON_DEMAND', 'SPOT', "
        "'CAPACITY_BLOCK']",
    ),
    "the system group's size": (_stack(nodeGroups=[SYSTEM | {"desiredSize": 0}, GROUP]),
                                "eks-ddp:nodeGroups[0].desiredSize: 0 is not allowed; use 1 to 10"),
    "the system group's type": (
        _stack(nodeGroups=[GROUP, SYSTEM | {"instanceType": "m7g"}]),
        "eks-ddp:nodeGroups[1].instanceType: 'm7g' is not allowed; give an EC2 instance type such as c7g.16xlarge, "
        "m5.large or p5.48xlarge",
    ),
    "both ways to name an existing cluster": (
        {**KUBECONFIG_CLUSTER, "existingCluster": {"kubeconfig": "~/.kube/c", "eksClusterName": "x"}},
        "eks-ddp:existingCluster: {'kubeconfig': '~/.kube/c', 'eks_cluster_name': 'x'} is not allowed; give exactly "
        "one of existingCluster.kubeconfig (a path or its contents) and existingCluster.eksClusterName",
    ),
    "a VPC for an existing cluster": (
        {**KUBECONFIG_CLUSTER, "vpc": {"cidr": "10.0.0.0/16"}},
        "eks-ddp:vpc: {'cidr': '10.0.0.0/16'} is not allowed; it shapes a new cluster: leave it out with "
        "existingCluster",
    ),
    "a model bucket beside a kubeconfig cluster": (
        {**KUBECONFIG_CLUSTER, "modelBucket": True},
        f"eks-ddp:modelBucket: True is not allowed; {NOT_IN_AWS}; give existingCluster.eksClusterName",
    ),
    "the VPC's size": (_stack(vpc={"cidr": "10.0.0.0/8", "availabilityZones": ["us-west-2a", "us-west-2b"]}),
                       "eks-ddp:vpc.cidr: '10.0.0.0/8' is not allowed; the prefix must be /16 to /24"),
    "an existing file system's id": (_stack(storage={"kind": "existing-fsx", "fileSystemId": "fs-1"}),
                                     "eks-ddp:storage.fileSystemId: 'fs-1' is not allowed; use an id such as "
                                     "fs-0123456789abcdef0"),
    "a new file system's deployment": (_stack(storage={"kind": "fsx", "deploymentType": "SCRATCH_9"}),
                                       "eks-ddp:storage.deploymentType: 'SCRATCH_9' is not allowed; use one of "
                                       "SCRATCH_2, PERSISTENT_2"),
    "FSx without a group to live beside": (
        _stack(nodeGroups=[], job={}),
        "eks-ddp:storage.kind: 'fsx' is not allowed; fsx lives in a node group's zone: add a node group, or use efs "
        "or none",
    ),
    "a topology EC2 does not give the group": (
        _stack(queueing="kueue", queueTopology="required"),
        "eks-ddp:queueTopology: 'required' is not allowed; EC2 gives c7gn.16xlarge (trainers) no network topology: "
        "use preferred or off",
    ),
    "a timeout that is not a duration": (
        _stack(queueing="kueue", queuePodsReadyTimeout="soon"),
        "eks-ddp:queuePodsReadyTimeout: 'soon' is not allowed; give a duration above zero in h, m and s, such as "
        "'10m' or '1h30m'",
    ),
    "a quota on a group the stack lacks": (
        _stack(queueing="kueue", queueQuotas={"vision": {"gpus": {"cpu": "1"}}}),
        "eks-ddp:queueQuotas.vision.gpus: {'cpu': '1'} is not allowed; name a training group: system, trainers",
    ),
    "a team's name": (_stack(queueing="kueue", queueQuotas={"Vision": {}}),
                      "eks-ddp:queueQuotas.Vision: 'Vision' is not allowed; name a team in lower case letters, digits "
                      "and '-'"),
    "a Kubernetes version": (_stack(kubernetesVersion="1.20"), "eks-ddp:kubernetesVersion: '1.20' is not allowed; use "
                             "one of 1.34, 1.35 (EKS standard support)"),
    "a namespace": (_stack(trainingNamespace="Bad_NS"),
                    "eks-ddp:trainingNamespace: 'Bad_NS' is not allowed; use a DNS label"),
    "a checkpoint expiry": (_stack(checkpointExpiryDays=-3), "eks-ddp:checkpointExpiryDays: -3 is not allowed; use a "
                            "positive number of days, or leave it out to keep checkpoints"),
    "an existing cluster's unknown key": (
        {**KUBECONFIG_CLUSTER, "existingCluster": {"kubeconfig": "k", "colour": 1}},
        "eks-ddp:existingCluster.colour: 1 is not allowed; known keys are context, eksClusterName, kubeconfig",
    ),
    "a context without a kubeconfig": (
        {**KUBECONFIG_CLUSTER, "existingCluster": {"eksClusterName": "x", "context": "c"}},
        "eks-ddp:existingCluster.context: 'c' is not allowed; it goes with kubeconfig",
    ),
    "a security group beside a kubeconfig cluster": (
        {**KUBECONFIG_CLUSTER, "storage": {"kind": "existing-fsx", "fileSystemId": FILE_SYSTEM, "dnsName": DNS_NAME,
                                           "mountName": "abcdefgh", "securityGroupId": "sg-0123456789abcdef0"}},
        f"eks-ddp:storage.securityGroupId: 'sg-0123456789abcdef0' is not allowed; {NOT_IN_AWS}; give "
        "existingCluster.eksClusterName",
    ),
    "Karpenter's node repair without Karpenter": (
        _stack(karpenterNodeRepair=True),
        "eks-ddp:karpenterNodeRepair: True is not allowed; it is Karpenter's: needs autoscaler karpenter, not "
        "cluster-autoscaler",
    ),
}


@pytest.mark.parametrize(("values", "message"), COMPONENT_REFUSALS.values(), ids=list(COMPONENT_REFUSALS))
def test_a_component_s_refusal_names_the_stack_key_the_user_wrote(values: dict[str, Any], message: str) -> None:
    """The components check their own arguments (infra/); the stack's message names the key as the stack file
    spells it, at the index the user gave it, with the value as written."""
    assert _refusal(values) == message


GPU_GROUP = {"name": "gpus", "instanceType": "p4d.24xlarge", "availabilityZone": "us-west-2a", "maxSize": 2}


def _checked(gpu: bool, groups: list[dict[str, Any]], **top: Any) -> str | None:
    return parse({"nodeGroups": groups, **top}, "us-west-2").checked_group(gpu)


@pytest.mark.parametrize(
    ("gpu", "groups", "top", "checked"),
    [
        (False, [GROUP], {}, "trainers"),
        (False, [GROUP], {"fabricCheck": "off"}, None),
        (False, [GROUP], {"fabricCheck": "report"}, "trainers"),
        (False, [GROUP | {"efa": False}], {}, None),  # nothing to prove without EFA
        (False, [GROUP | {"maxSize": 1}], {}, None),  # two nodes are needed to prove the fabric between them
        (False, [GROUP | {"maxSize": 1}, GPU_GROUP], {}, "gpus"),  # the first that qualifies
        (False, [{k: v for k, v in GROUP.items() if k != "maxSize"}], {}, "trainers"),  # maxSize defaults to 2
        (True, [GROUP, GPU_GROUP], {}, "gpus"),  # the NCCL check needs GPUs
        (True, [GROUP], {}, None),
        (True, [GROUP, GPU_GROUP], {"ncclCheck": False}, None),
        (False, [GROUP, GPU_GROUP], {"job": {"nodeGroup": "gpus", "prepareData": False, "evaluate": False}}, "gpus"),
        (False, [GROUP, GPU_GROUP], {"job": {"nodeGroup": "system", "replicas": 1}}, "trainers"),  # it has no EFA
    ],
)
def test_the_fabric_check_proves_the_job_s_group_or_the_first_that_qualifies(
    gpu: bool, groups: list[dict[str, Any]], top: dict[str, Any], checked: str | None
) -> None:
    assert _checked(gpu, groups, **top) == checked


def test_a_job_on_the_system_nodes_takes_their_shape() -> None:
    config = parse({"nodeGroups": [{"name": "system", "instanceType": "m5.large", "desiredSize": 3}],
                    "storage": {"kind": "none"}, "job": {"nodeGroup": "system", "replicas": 3}}, "us-west-2")
    shape = config.job_shape({})
    assert (shape.get("name"), shape.get("instance_type"), shape.get("max_size")) == ("system", "m5.large", 3)
    trained = {"name": "trainers", "instance_type": "c7gn.16xlarge"}
    assert parse(_stack(), "us-west-2").job_shape({"trainers": trained}) is trained  # type: ignore[arg-type]


EDGES = {
    "no node groups and no storage": {"storage": {"kind": "none"}},
    "an existing cluster whose groups the stack does not describe": {
        k: v for k, v in KUBECONFIG_CLUSTER.items() if k != "nodeGroups"
    },
    "10 node losses": _stack(job_survivesNodeLosses=10),
    "0 node losses": _stack(job_survivesNodeLosses=0),
    "an elastic minimum of all the replicas": _stack(job_elasticMinReplicas=2),
    "an elastic minimum of 1": _stack(job_elasticMinReplicas=1, job_batchSize=64),
    "as many replicas as maxSize": _stack(job_replicas=4),
}


@pytest.mark.parametrize("values", EDGES.values(), ids=list(EDGES))
def test_a_value_at_the_edge_of_what_is_allowed_is_taken(values: dict[str, Any]) -> None:
    parse(values, "us-west-2")


def test_a_cluster_given_by_kubeconfig_is_described_from_the_catalogue_never_by_asking_ec2() -> None:
    """Nothing in AWS is reachable for it: `pulumi up` would otherwise fail asking EC2 with no credentials."""

    def ec2(instance_type: str) -> Any:
        raise AssertionError(f"EC2 was asked about {instance_type}")

    with_job = {**KUBECONFIG_CLUSTER, "job": {"nodeGroup": "cpu", "evaluate": False}}
    config = parse(with_job, "us-west-2", ec2)
    assert config.platform.get("existing_cluster") == {"kubeconfig": "~/.kube/c"} and config.job is not None
