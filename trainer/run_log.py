"""What rank 0 records while training: metrics.jsonl and TensorBoard events, one step never twice.

A resumed run starts again at its checkpoint's step: the lines and events written after that step
by the run that was cut off are dropped (metrics.jsonl is rewritten without them; the event writer
purges them with `purge_step`), so a chart or a table shows each step once, with the resumed values.
A new pod resumed from S3 first gets back the history the run uploaded (ArtifactStore.restore_history),
so the rule covers that history too.
"""

import json
from pathlib import Path
from typing import Any

from torch.utils.tensorboard import SummaryWriter

from eks_ddp.trainer.atomic import write_atomically
from eks_ddp.trainer.outputs import EVENTS_PREFIX, METRICS_FILE, TENSORBOARD_DIR


class RunLog:
    def __init__(self, output_dir: Path, resumed_from: int) -> None:
        self.metrics = output_dir / METRICS_FILE
        self.events = output_dir / TENSORBOARD_DIR
        if self.metrics.exists():
            kept = [line for line in self.metrics.read_text().splitlines() if _step(line) <= resumed_from]
            write_atomically(self.metrics, "".join(line + "\n" for line in kept).encode())
        self.writer = SummaryWriter(str(self.events), purge_step=resumed_from + 1 if resumed_from else None)

    def interval(self, step: int, epoch: int, loss: float, learning_rate: float, images_per_second: float) -> None:
        """One log interval: `loss` is the mean over ranks."""
        record = {
            "step": step,
            "epoch": epoch,
            "loss": round(loss, 6),
            "learning_rate": learning_rate,
            "images_per_second": round(images_per_second, 1),
        }
        with self.metrics.open("a") as stream:
            stream.write(json.dumps(record) + "\n")
        self.writer.add_scalar("train/loss", loss, step)
        self.writer.add_scalar("train/learning_rate", learning_rate, step)
        self.writer.add_scalar("train/images_per_second", images_per_second, step)

    def epoch(self, step: int, record: dict[str, Any]) -> None:
        self.writer.add_scalar("epoch/train_loss", record["train_loss"], step)
        self.writer.add_scalar("epoch/test_accuracy", record["test_accuracy"], step)
        self.writer.flush()

    def files(self) -> list[Path]:
        """metrics.jsonl and the TensorBoard event files, everything recorded so far on disk."""
        self.writer.flush()
        return [self.metrics, *sorted(self.events.glob(f"{EVENTS_PREFIX}*"))]

    def close(self) -> None:
        self.writer.close()


def _step(line: str) -> float:
    """A line's step; a line a crash cut off reads as infinitely late, so it is dropped."""
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return float("inf")
