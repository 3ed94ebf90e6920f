"""The eks-ddp policy pack: `pulumi preview --policy-pack policy` (from the repository).

Rules are pure functions (unit-tested), named and described in policy/rules.py; policy/pack.py wraps
them for the Pulumi policy engine; policy/__main__.py starts the pack (only the
Pulumi CLI runs it: constructing a PolicyPack starts a server).
"""
