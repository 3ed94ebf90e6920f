"""What a rank reports of its run: each log interval and each epoch in the log (or on the progress bar), in the run
log that rank 0 writes (metrics.jsonl, TensorBoard) and in the Prometheus metrics its pod serves (--metrics-port)."""

import logging
from typing import TYPE_CHECKING, Any

from eks_ddp.trainer.config import TrainConfig
from eks_ddp.trainer.distributed import Topology
from eks_ddp.trainer.resume import Progress

if TYPE_CHECKING:  # imported where used: TensorBoard and prometheus_client cost a rank that never uses them
    from eks_ddp.trainer.metrics_export import MetricsExport
    from eks_ddp.trainer.run_log import RunLog

log = logging.getLogger(__name__)


class Reporter:
    """One rank's reports; the run log and the metrics server start with `open`, once the run has resumed."""

    def __init__(self, config: TrainConfig, topology: Topology) -> None:
        self.config = config
        self.topology = topology
        self.run_log: RunLog | None = None
        self.metrics: MetricsExport | None = None

    def open(self, resumed_from: int, total_steps: int, global_batch: int) -> None:
        if self.topology.is_main:
            from eks_ddp.trainer import run_log  # TensorBoard's writer: rank 0 writes the run's log

            self.run_log = run_log.RunLog(self.config.output_dir, resumed_from)
        if self.topology.is_node_main and self.config.metrics_port:  # every pod serves the port it declares
            self.metrics = self._export_metrics(resumed_from, total_steps, global_batch)

    def _export_metrics(self, resumed_from: int, total_steps: int, global_batch: int) -> "MetricsExport | None":
        """This pod's metrics server (its local rank 0's); a port it cannot have is a warning, never a lost run."""
        from eks_ddp.trainer import metrics_export  # prometheus_client: with --metrics-port only

        config = self.config
        try:
            metrics = metrics_export.MetricsExport(
                config.metrics_port,
                config.metrics_address,
                config.run_name,
                self.topology.world_size,
                self.topology.node_rank,
                self.topology.restart_count,
                total_steps,
                global_batch,
            )
        except OSError as error:
            log.warning("metrics are not served: port %d: %s", config.metrics_port, error.strerror or error)
            return None
        if resumed_from:
            metrics.checkpoint_step.set(resumed_from)
        log.info("metrics: http://%s:%d/metrics", config.metrics_address, metrics.port)
        return metrics

    def interval(
        self, bar: Any, progress: Progress, loss: float, learning_rate: float, rate: float, steps: int
    ) -> None:
        """`loss`: the interval's mean over `steps` steps and the ranks."""
        if self.run_log is not None:
            self.run_log.interval(progress.step, progress.epoch + 1, loss, learning_rate, rate)
        if self.metrics is not None:
            self.metrics.interval(progress.step, progress.epoch + 1, loss, learning_rate, rate, steps)
        if bar.disable:
            log.info(
                "epoch %d/%d step %d loss %.4f %.0f images/s",
                progress.epoch + 1,
                self.config.epochs,
                progress.step,
                loss,
                rate,
            )
        else:
            bar.set_postfix(loss=f"{loss:.4f}", rate=f"{rate:.0f} img/s")

    def epoch(self, step: int, record: dict[str, Any]) -> None:
        """An epoch's record: its number (from 1), mean train loss over the ranks, test accuracy, elapsed seconds."""
        if self.run_log is not None:
            self.run_log.epoch(step, record)
        if self.metrics is not None:
            self.metrics.epoch_end(record["test_accuracy"])
        log.info(
            "epoch %d/%d: train loss %.4f, test accuracy %.2f %%",
            record["epoch"],
            self.config.epochs,
            record["train_loss"],
            100 * record["test_accuracy"],
        )

    def checkpoint(self, step: int) -> None:
        if self.metrics:
            self.metrics.checkpoint(step)

    def close(self) -> None:
        if self.run_log:
            self.run_log.close()
        if self.metrics:
            self.metrics.close()
