"""Where AWS publishes the images of EKS add-ons in each region: pull from the cluster's own.

Source: the EKS user guide, "View Amazon container image registries for Amazon EKS add-ons"
(awsdocs/amazon-eks-user-guide latest/ug/workloads/add-ons-images.adoc, 2026): EKS replicates these images to a
repository in each region it supports, under 602401143452 except in the regions below (ap-southeast-5 from
eksctl-io/eksctl v0.230.0 pkg/apis/eksctl.io/v1alpha5/types.go `EKSResourceAccountID`, which eksctl uses the same way
for the EFA device plugin: pkg/addons/device_plugin.go `useRegionalImage`). A chart's default image from another
region is a cross-region pull at every node start, and fails in an isolated partition.
"""

DEFAULT_ACCOUNT = "602401143452"
ACCOUNTS = {
    "af-south-1": "877085696533",
    "ap-east-1": "800184023465",
    "ap-east-2": "533267051163",
    "ap-south-2": "900889452093",
    "ap-southeast-3": "296578399912",
    "ap-southeast-4": "491585149902",
    "ap-southeast-5": "151610086707",
    "ap-southeast-6": "333609536671",
    "ap-southeast-7": "121268973566",
    "ca-west-1": "761377655185",
    "cn-north-1": "918309763551",
    "cn-northwest-1": "961992271922",
    "eu-central-2": "900612956339",
    "eu-south-1": "590381155156",
    "eu-south-2": "455263428931",
    "eusc-de-east-1": "877088126301",
    "il-central-1": "066635153087",
    "me-central-1": "759879836304",
    "me-south-1": "558608220178",
    "mx-central-1": "730335286997",
    "us-gov-east-1": "151742754352",
    "us-gov-west-1": "013241004608",
}


def dns_suffix(region: str) -> str:
    """The partition's domain: China's and the European Sovereign Cloud's differ."""
    if region.startswith("cn-"):
        return "amazonaws.com.cn"
    return "amazonaws.eu" if region.startswith("eusc-") else "amazonaws.com"


def eks_addon_registry(region: str) -> str:
    """The registry of EKS add-on images in `region`."""
    return f"{ACCOUNTS.get(region, DEFAULT_ACCOUNT)}.dkr.ecr.{region}.{dns_suffix(region)}"
