"""EKS add-on images come from the cluster's own region (the EKS user guide's registry table)."""

import pytest

from eks_ddp.infra.addons.efa_device_plugin import image_repository


@pytest.mark.parametrize(
    ("region", "repository"),
    [
        ("us-east-1", "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin"),
        ("af-south-1", "877085696533.dkr.ecr.af-south-1.amazonaws.com/eks/aws-efa-k8s-device-plugin"),
        ("cn-north-1", "918309763551.dkr.ecr.cn-north-1.amazonaws.com.cn/eks/aws-efa-k8s-device-plugin"),
        ("us-gov-west-1", "013241004608.dkr.ecr.us-gov-west-1.amazonaws.com/eks/aws-efa-k8s-device-plugin"),
    ],
)
def test_the_efa_device_plugin_is_pulled_from_the_regions_eks_registry(region: str, repository: str) -> None:
    assert image_repository(region) == repository
