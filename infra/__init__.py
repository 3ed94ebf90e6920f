"""Pulumi components for the AWS side (VPC, EKS, EFA node groups, add-ons, storage).

Not written yet: issue 3 fills this package. Nothing here deploys anything.
"""
