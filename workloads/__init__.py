"""Pulumi components that deploy training jobs (PyTorchJob, TrainJob, Indexed Job), their side Jobs and the trainer
image; the manifests they send are built by pure functions beside them."""
