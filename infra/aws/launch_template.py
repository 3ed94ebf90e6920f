"""The launch template every node group starts from: IMDSv2 only, encrypted gp3 root."""

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_aws as aws


def secure_launch_template(
    name: str, parent: pulumi.Resource, tags: Mapping[str, str], hop_limit: int, volume_gib: int, **settings: Any
) -> aws.ec2.LaunchTemplate:
    """Hop limit 1 keeps pods from reaching the node's instance credentials (they use IRSA)."""
    return aws.ec2.LaunchTemplate(
        name,
        metadata_options={
            "http_endpoint": "enabled",
            "http_tokens": "required",
            "http_put_response_hop_limit": hop_limit,
        },
        block_device_mappings=[
            {
                "device_name": "/dev/xvda",
                "ebs": {
                    "volume_size": volume_gib,
                    "volume_type": "gp3",
                    "encrypted": "true",
                    "delete_on_termination": "true",
                },
            }
        ],
        tag_specifications=[
            {"resource_type": kind, "tags": {**tags, "Name": name}}
            for kind in ("instance", "volume", "network-interface")
        ],
        tags=dict(tags),
        update_default_version=True,
        opts=pulumi.ResourceOptions(parent=parent),
        **settings,
    )


def template_reference(template: aws.ec2.LaunchTemplate) -> aws.eks.NodeGroupLaunchTemplateArgsDict:
    """How a managed node group points at the template's newest version."""
    return {"id": template.id, "version": template.latest_version.apply(str)}
