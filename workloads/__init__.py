"""Pulumi components that deploy PyTorchJobs and their helper Jobs.

Not written yet: issue 4 fills this package. Nothing here deploys anything.
"""
