"""The policy pack's checks of AWS resources: S3 buckets, launch templates, security groups, EKS, ECR."""

from eks_ddp.policy.iam_rules import document, statements
from eks_ddp.policy.resources import Props


def bucket_public_access_blocked(_: str, props: Props) -> list[str]:
    flags = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    return [f"{flag} must be true" for flag in flags if props.get(flag) is not True]


def bucket_encrypted(_: str, props: Props) -> list[str]:
    rules = props.get("rules") or []
    algorithms = [
        rule.get("applyServerSideEncryptionByDefault", {}).get("sseAlgorithm")
        for rule in rules
        if isinstance(rule, dict)
    ]
    return (
        []
        if any(algorithm in ("aws:kms", "aws:kms:dsse", "AES256") for algorithm in algorithms)
        else ["no default server-side encryption"]
    )


def bucket_tls_only(_: str, props: Props) -> list[str]:
    if "policy" not in props:
        return []
    for statement in statements(document(props["policy"])):
        condition = statement.get("Condition", {}).get("Bool", {})
        if statement.get("Effect") == "Deny" and str(condition.get("aws:SecureTransport")).lower() == "false":
            return []
    return ["the bucket policy does not deny requests without TLS (aws:SecureTransport false)"]


def launch_template_hardened(_: str, props: Props) -> list[str]:
    problems = []
    if (props.get("metadataOptions") or {}).get("httpTokens") != "required":
        problems.append("IMDSv2 is not required (metadataOptions.httpTokens must be 'required')")
    for mapping in props.get("blockDeviceMappings") or []:
        ebs = mapping.get("ebs") or {}
        if ebs and str(ebs.get("encrypted")).lower() != "true":
            problems.append(f"EBS volume {mapping.get('deviceName')} is not encrypted")
    return problems


OPEN = {"0.0.0.0/0", "::/0"}


def no_open_ingress(resource_type: str, props: Props) -> list[str]:
    if resource_type == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
        open_to = {props.get("cidrIpv4"), props.get("cidrIpv6")} & OPEN
        return [f"ingress from {cidr}" for cidr in sorted(str(cidr) for cidr in open_to)]
    problems = []
    for rule in props.get("ingress") or []:
        for cidr in [*(rule.get("cidrBlocks") or []), *(rule.get("ipv6CidrBlocks") or [])]:
            if cidr in OPEN:
                problems.append(f"ingress from {cidr}")
    return problems


def eks_encrypted_and_logged(resource_type: str, props: Props) -> list[str]:
    problems = []
    if resource_type == "eks:index:Cluster":
        encrypted = bool(props.get("encryptionConfigKeyArn"))
    else:
        encrypted = bool(props.get("encryptionConfig"))
    if not encrypted:
        problems.append("secrets encryption with a KMS key is not configured")
    if not props.get("enabledClusterLogTypes"):
        problems.append("control-plane logging is off")
    return problems


def ecr_scanned_and_immutable(_: str, props: Props) -> list[str]:
    problems = []
    if (props.get("imageScanningConfiguration") or {}).get("scanOnPush") is not True:
        problems.append("images are not scanned on push")
    if props.get("imageTagMutability") != "IMMUTABLE":
        problems.append("image tags are mutable")
    return problems
