"""Entry point the Pulumi CLI runs for `--policy-pack policy`."""

from pulumi_policy import PolicyPack

from eks_ddp.policy.pack import POLICIES

PolicyPack(name="eks-ddp", policies=POLICIES)
