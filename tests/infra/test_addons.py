import json

import pulumi_kubernetes as k8s
import pytest

from eks_ddp.infra.addons.cluster_autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from eks_ddp.infra.addons.efa_device_plugin import EfaDevicePlugin
from eks_ddp.infra.addons.metrics_server import MetricsServer
from eks_ddp.infra.addons.training_operator import TrainingOperator
from eks_ddp.infra.aws.efa_node_group import TaintEffect
from eks_ddp.infra.aws.iam import irsa_trust, pod_identity_trust
from eks_ddp.infra.errors import InvalidArgument
from eks_ddp.infra.facts import versions
from eks_ddp.infra.facts.catalogue import EFA_INSTANCE_TYPES
from eks_ddp.tools.mocking import ACCOUNT, OIDC_ISSUER
from tests.pulumi_harness import Recorded

PROVIDER_ARN = f"arn:aws:iam::{ACCOUNT}:oidc-provider/{OIDC_ISSUER}"


def _provider() -> k8s.Provider:
    return k8s.Provider("k8s", kubeconfig="{}")


def _autoscaler_args(**overrides: object) -> ClusterAutoscalerArgs:
    args: dict[str, object] = {
        "provider": _provider(), "cluster_name": "training", "kubernetes_version": "1.35",
        "oidc_provider_arn": PROVIDER_ARN, "oidc_issuer": OIDC_ISSUER, "region": "us-east-1",
    }
    args.update(overrides)
    return args  # type: ignore[return-value]


def test_efa_device_plugin_only_on_efa_nodes_and_tolerates_their_taints(pulumi_mocks: Recorded) -> None:
    taints = [{"key": "nvidia.com/gpu", "value": "true", "effect": TaintEffect.NO_SCHEDULE}, {"key": "nvidia.com/gpu", "effect": TaintEffect.NO_SCHEDULE}]
    pulumi_mocks.run(lambda: EfaDevicePlugin("efa", {"provider": _provider(), "node_taints": taints}))  # type: ignore[typeddict-item]
    release = pulumi_mocks.named("efa-chart").inputs
    assert (release["chart"], release["version"], release["repositoryOpts"]["repo"]) == versions.EFA_DEVICE_PLUGIN_CHART
    assert release["namespace"] == "kube-system"
    assert release["values"]["nodeSelector"] == {"vpc.amazonaws.com/efa.present": "true"}
    assert release["values"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    # The chart's own list becomes a required node affinity: ours is the catalogue's, so it cannot lag it.
    labels = release["values"]["supportedInstanceLabels"]
    assert labels["keys"] == ["node.kubernetes.io/instance-type"] and set(labels["values"]) == set(EFA_INSTANCE_TYPES)
    assert release["timeout"] == 600


def test_efa_device_plugin_also_runs_on_the_stacks_efa_types_the_catalogue_lacks(pulumi_mocks: Recorded) -> None:
    args = {"provider": _provider(), "instance_types": ["c8gn.48xlarge"]}
    pulumi_mocks.run(lambda: EfaDevicePlugin("efa", args))  # type: ignore[arg-type]
    labels = pulumi_mocks.named("efa-chart").inputs["values"]["supportedInstanceLabels"]["values"]
    assert set(labels) == set(EFA_INSTANCE_TYPES) | {"c8gn.48xlarge"}


def test_nvidia_device_plugin_only_on_our_gpu_nodes_tolerating_their_taints(pulumi_mocks: Recorded) -> None:
    """The EKS AL2023 NVIDIA AMIs ship no device plugin: without one no pod gets nvidia.com/gpu."""
    from eks_ddp.infra.addons.nvidia_device_plugin import CHART_TOLERATIONS, NvidiaDevicePlugin

    taints = [{"key": "dedicated", "value": "llm", "effect": TaintEffect.NO_EXECUTE}]
    pulumi_mocks.run(lambda: NvidiaDevicePlugin("gpu", {"provider": _provider(), "node_taints": taints}))  # type: ignore[typeddict-item]
    release = pulumi_mocks.named("gpu-chart").inputs
    assert (release["chart"], release["version"], release["repositoryOpts"]["repo"]) == versions.NVIDIA_DEVICE_PLUGIN_CHART
    assert release["values"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert release["values"]["tolerations"] == [
        *CHART_TOLERATIONS, {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}
    ]
    assert release["timeout"] == 600


def test_autoscaler_role_is_least_privilege_and_trusts_only_its_service_account(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: ClusterAutoscaler("cas", _autoscaler_args()))
    trust = json.loads(pulumi_mocks.named("cas-role").inputs["assumeRolePolicy"])
    cluster_arn = f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/training"
    assert trust == pod_identity_trust(cluster_arn, "kube-system", "cluster-autoscaler")  # EKS Pod Identity by default
    association = pulumi_mocks.named("cas-role-association")
    assert (association.inputs["namespace"], association.inputs["serviceAccount"]) == ("kube-system", "cluster-autoscaler")
    assert association.urn in pulumi_mocks.named("cas-chart").dependencies  # its pods start after the association
    describe, nodegroups, scale = json.loads(pulumi_mocks.named("cas-policy").inputs["policy"])["Statement"]
    assert nodegroups["Action"] == "eks:DescribeNodegroup" and nodegroups["Resource"] == "arn:aws:eks:*:*:nodegroup/training/*/*"
    assert all(action.split(":")[1].startswith(("Describe", "Get")) for action in describe["Action"])
    assert scale["Action"] == ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"]
    assert scale["Condition"] == {"StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/training": "owned"}}
    values = pulumi_mocks.named("cas-chart").inputs["values"]
    assert values["image"]["tag"] == "v1.35.2" and values["autoDiscovery"] == {"clusterName": "training"}
    assert values["extraArgs"] == {"expander": "least-waste", "balance-similar-node-groups": True, "skip-nodes-with-local-storage": False, "skip-nodes-with-system-pods": False}
    assert values["rbac"]["serviceAccount"]["annotations"] == {}
    assert values["podAnnotations"] == {"eks-ddp/role-access": "pod-identity"}  # switching ways rolls the pods


def test_autoscaler_keeps_irsa_as_an_option(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: ClusterAutoscaler("cas", _autoscaler_args(access="irsa")))
    trust = json.loads(pulumi_mocks.named("cas-role").inputs["assumeRolePolicy"])
    assert trust == irsa_trust(PROVIDER_ARN, OIDC_ISSUER, "kube-system", "cluster-autoscaler")
    values = pulumi_mocks.named("cas-chart").inputs["values"]
    assert values["rbac"]["serviceAccount"]["annotations"]["eks.amazonaws.com/role-arn"] == pulumi_mocks.named("cas-role").inputs["arn"]
    assert values["podAnnotations"] == {"eks-ddp/role-access": "irsa"}


def test_autoscaler_refuses_a_kubernetes_version_without_a_matching_image(pulumi_mocks: Recorded) -> None:
    def program() -> None:
        with pytest.raises(InvalidArgument, match=r"ClusterAutoscaler: kubernetes_version='1.30' is not allowed; an autoscaler image is pinned for 1.34, 1.35"):
            ClusterAutoscaler("cas", _autoscaler_args(kubernetes_version="1.30"))

    pulumi_mocks.run(program)
    assert not [r for r in pulumi_mocks.monitor.registrations if r.type.startswith(("eksddp", "aws"))]


def test_metrics_server_is_pinned(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: MetricsServer("metrics", {"provider": _provider()}))
    release = pulumi_mocks.named("metrics-chart").inputs
    assert (release["chart"], release["version"]) == versions.METRICS_SERVER_CHART[:2]


def test_training_operator_overlay_is_pinned_with_hpa_rbac(pulumi_mocks: Recorded) -> None:
    pulumi_mocks.run(lambda: TrainingOperator("operator", {"provider": _provider()}))
    manifests = pulumi_mocks.named("operator-manifests")
    assert manifests.type == "kubernetes:kustomize/v2:Directory"
    assert manifests.inputs["directory"] == "github.com/kubeflow/trainer.git/manifests/overlays/standalone?ref=v1.9.4"
    (role,) = pulumi_mocks.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
    assert role.inputs["rules"][0]["resources"] == ["horizontalpodautoscalers"]
    (binding,) = pulumi_mocks.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
    assert binding.inputs["subjects"] == [{"kind": "ServiceAccount", "name": "training-operator", "namespace": "kubeflow"}]
    assert manifests.urn in binding.dependencies


def test_training_operator_refuses_trainer_v2_tags(pulumi_mocks: Recorded) -> None:
    def program() -> None:
        with pytest.raises(InvalidArgument, match="version='v2.0.0' is not allowed; use a v1 release tag"):
            TrainingOperator("operator", {"provider": _provider(), "version": "v2.0.0"})

    pulumi_mocks.run(program)
