"""AWS resources: the VPC, the EKS cluster, EFA node groups and their launch template, IAM, the model bucket."""
