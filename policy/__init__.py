"""The eks-ddp policy pack: `pulumi preview --policy-pack policy` (from the repository).

Rules live in policy/rules.py as pure functions (unit-tested); policy/pack.py wraps
them for the Pulumi policy engine; policy/__main__.py starts the pack (only the
Pulumi CLI runs it: constructing a PolicyPack starts a server).
"""
