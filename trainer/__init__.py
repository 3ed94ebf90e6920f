"""The bundled PyTorch DDP trainer.

It reads only the torchrun contract (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT, TORCHELASTIC_RESTART_COUNT), so the same image runs under plain
torchrun, a Kubeflow PyTorchJob (static or elastic) and a Kubeflow TrainJob.
It imports torch and never pulumi.
"""
