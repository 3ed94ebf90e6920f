"""The validated settings of one `train` run (built by the CLI, read by the loop)."""

from dataclasses import dataclass
from pathlib import Path

from eks_ddp.trainer.datasets import SyntheticShape


@dataclass(frozen=True)
class TrainConfig:
    dataset: str
    data_dir: Path | None
    model: str
    epochs: int
    batch_size: int
    """Per rank, as in the workshop; with global_batch_size, the largest micro-batch a rank runs at once."""
    global_batch_size: int | None
    """Samples per optimizer step over all ranks; None: batch_size times the world size the run starts with."""
    lr: float
    weight_decay: float
    warmup_fraction: float
    seed: int
    precision: str
    device: str
    """auto (CUDA when present), cpu, or cuda (stop when there is none: the pod was given GPUs)."""
    output_dir: Path
    run_name: str
    """Recorded in checkpoints: a directory holding another run's checkpoints is refused."""
    checkpoint_dir: Path
    artifact_uri: str | None
    checkpoint_uri: str | None
    """Where the checkpoints go in S3 (default ARTIFACT_URI/checkpoints)."""
    """s3://BUCKET/PREFIX: rank 0 uploads the results and checkpoints there and resumes from it."""
    checkpoint_every: int
    """Optimizer steps between checkpoints (0: only at epoch ends)."""
    keep_checkpoints: int
    log_every: int
    metrics_port: int
    """Each node's first process (local rank 0) serves Prometheus metrics on this port (0: not at all)."""
    metrics_address: str
    compile: bool
    timeout_minutes: float
    synthetic: SyntheticShape
