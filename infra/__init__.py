"""Pulumi components for the platform, grouped by concern.

- `platform`: TrainingPlatform, the whole platform from one args dict (its arguments `platform_args`, their checks
  `platform_validation`, its children built by `platform_cluster`, `platform_addons`, `platform_storage`);
- `node_group`: a node group's settings resolved once (`NodeGroup`), with its defaults and checks;
- `aws`: AWS resources (the VPC, the EKS cluster, EFA node groups and their launch template, IAM, the model bucket);
- `addons`: what runs in the cluster (device plugins, autoscalers, operators, monitoring, node quarantine, charts);
- `storage`: shared volumes (FSx for Lustre, EFS, an existing FSx file system) and the claim jobs mount;
- `facts`: what the components know offline (instance types, allocatable, pinned versions);
- `args`, `options`, `errors`: how every component takes its args, waits and refuses bad input.
"""
