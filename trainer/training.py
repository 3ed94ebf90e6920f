"""The DDP training loop: resume (trainer.resume chooses where), train (trainer.reporting tells how it goes),
checkpoint, evaluate, write the outputs.

Order matters for safety: inputs are validated and the dataset loaded before the
process group starts; the checkpoint is chosen and checked on rank 0 and its
bytes broadcast, so every rank resumes from the same counters before DDP wraps
the model; nothing in --output-dir or --checkpoint-dir is replaced until a run
has something better to put there.

A run is exact across resizes: its global batch is fixed when it starts and kept in
its checkpoints, each step covers it with micro-batches and gradient accumulation on
whatever number of ranks the run resumes with, and the LR schedule counts those
optimizer steps; so an interrupted run makes the optimizer steps of an uninterrupted one.
"""

import contextlib
import datetime
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from tqdm import tqdm

from eks_ddp.trainer import datasets, distributed, evaluation, models, outputs, precision, resume
from eks_ddp.trainer.checkpoint import CheckpointManager
from eks_ddp.trainer.config import TrainConfig
from eks_ddp.trainer.distributed import Topology
from eks_ddp.trainer.errors import UsageError
from eks_ddp.trainer.interrupt import StopSignals, TerminationRequested
from eks_ddp.trainer.reporting import Reporter
from eks_ddp.trainer.resume import Progress
from eks_ddp.trainer.sampling import BatchPlan, GlobalBatchSampler

if TYPE_CHECKING:  # imported where used: boto3 costs a rank that never uses it
    from eks_ddp.trainer.artifacts import ArtifactStore, Location

log = logging.getLogger(__name__)

EVAL_BATCH_SIZE = 1024
# How long a run's end (or a SIGTERM) waits for its uploads: inside the pod's 105 s shutdown window
# (workloads.training_pod.WORKER_SHUTDOWN_SECONDS), after the checkpoint write.
UPLOAD_WAIT_SECONDS = 60

Forward = Callable[[torch.Tensor], torch.Tensor]
"""What the loop trains through: the model, its DDP wrapper, or either of them compiled (--compile)."""


class Run:
    """One `train` invocation on one rank."""

    def __init__(self, config: TrainConfig, topology: Topology) -> None:
        self.config = config
        self.topology = topology
        self.started = time.perf_counter()
        self.device = distributed.pick_device(topology, config.device)  # before anything is written
        if config.checkpoint_uri and not config.artifact_uri:
            raise UsageError(f"--checkpoint-uri {config.checkpoint_uri}: give --artifact-uri too (the results' place)")
        locations: tuple[Location, Location | None] | None = None
        if config.artifact_uri:
            from eks_ddp.trainer import artifacts  # boto3: for runs with S3 only

            locations = (
                artifacts.Location.parse(config.artifact_uri, "--artifact-uri"),
                artifacts.Location.parse(config.checkpoint_uri, "--checkpoint-uri") if config.checkpoint_uri else None,
            )
        self.splits = datasets.load(config.dataset, config.data_dir, config.synthetic, config.seed)
        self.model_name = models.resolve(config.model, config.dataset)
        if topology.is_main:
            outputs.ensure_writable(config.output_dir, "--output-dir")
            outputs.ensure_writable(config.checkpoint_dir, "--checkpoint-dir")
        self.precision = precision.resolve(config.precision, self.device)
        torch.manual_seed(config.seed)
        self.model = models.build(self.model_name, self.splits.input_shape, len(self.splits.classes)).to(self.device)
        memory_format = models.memory_format(self.model_name)
        self.train_x = self.splits.train_x.to(self.device).contiguous(memory_format=memory_format)
        self.train_y = self.splits.train_y.to(self.device)
        self.test_x = self.splits.test_x.contiguous(memory_format=memory_format)
        # The splits keep these tensors, not a second copy of the images in the other memory format.
        self.splits = replace(self.splits, train_x=self.train_x, test_x=self.test_x)
        # One fused kernel per parameter instead of a dozen: 3 ms a step instead of 7-19 ms for the workshop CNN's
        # 3.2 M parameters on one core of this project's 2-core VM (torch 2.13.0, AVX2); CUDA has a fused kernel too.
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay, fused=True
        )
        self.checkpoints = CheckpointManager(
            config.checkpoint_dir, run_definition(config, self.model_name), config.keep_checkpoints
        )
        self.progress = Progress()
        self.artifacts: ArtifactStore | None = None
        if locations and topology.is_main:
            from eks_ddp.trainer import artifacts

            self.artifacts = artifacts.ArtifactStore(*locations, config.keep_checkpoints)
        self.reporter = Reporter(config, topology)
        self.ddp: DistributedDataParallel | None = None
        # Set by resume(): a resumed run keeps the global batch it started with.
        self.plan: BatchPlan
        self.sampler: GlobalBatchSampler
        self.scheduler: torch.optim.lr_scheduler.LambdaLR
        self.last_saved_step = -1
        self.plotted = 0
        """Epochs drawn in training-curves.png."""
        self.images_trained = 0
        self.training_seconds = 0.0

    # -- resume -------------------------------------------------------------------------

    def resume(self) -> int:
        """Load the newest good checkpoint (chosen by rank 0) on every rank and plan the run's batches;
        returns the step it resumed from."""
        state = resume.newest_state(self.topology, self.checkpoints, self.artifacts, self.config.output_dir)
        begin = resume.start(self.config, self.topology, state, len(self.train_y), self.model, self.optimizer)
        self.plan, self.sampler, self.scheduler = begin.plan, begin.sampler, begin.scheduler
        self.progress = begin.progress
        if state is None:
            return 0
        self.last_saved_step = self.progress.step
        log.info(
            "resumed from step %d (epoch %d, %d samples into it; global batch %d as %d x %d micro-batches x %d ranks; "
            "torchrun restart %d)",
            self.progress.step,
            self.progress.epoch + 1,
            self.progress.position,
            self.plan.global_batch,
            self.plan.accumulation,
            self.plan.micro_batch,
            self.topology.world_size,
            self.topology.restart_count,
        )
        return self.progress.step

    def save_checkpoint(self) -> None:
        if self.progress.step == self.last_saved_step:
            return
        if self.topology.is_main:
            state = {
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "progress": asdict(self.progress),
            }
            path = self.checkpoints.save(self.progress.step, state)
            log.info("checkpoint %s", path)
            if self.artifacts:
                self._upload_history()
                self.artifacts.upload_checkpoint(*self.checkpoints.paths(self.progress.step))
        self.last_saved_step = self.progress.step
        distributed.barrier()
        self.reporter.checkpoint(self.progress.step)

    def _upload_history(self) -> None:
        """What a user reads after a crash, in S3 as of each checkpoint (a SIGTERM's too): metrics.jsonl, the
        TensorBoard events and the curves."""
        run_log = self.reporter.run_log
        assert self.artifacts is not None and run_log is not None
        self._draw_curves()
        for path in [*run_log.files(), self.config.output_dir / outputs.CURVES_FILE]:
            self.artifacts.upload(path, *path.relative_to(self.config.output_dir).parts)

    def _draw_curves(self) -> None:
        """Redraw training-curves.png when an epoch has ended since it was drawn."""
        if len(self.progress.history) > self.plotted:
            from eks_ddp.trainer import plots  # matplotlib: only rank 0 draws, and only once an epoch has ended

            plots.training_curves(self.progress.history, self.config.output_dir / outputs.CURVES_FILE)
            self.plotted = len(self.progress.history)

    # -- train --------------------------------------------------------------------------

    def execute(self) -> dict[str, Any]:
        resumed_from = self.resume()
        model: Forward = self.model
        if self.topology.world_size > 1:
            # Gradients live in the communication buckets: no copy in and out on every step. No broadcast of the
            # batch-norm statistics before every forward: rank 0's are the only ones read (checkpoints, the model,
            # and test_accuracy, which broadcasts them first), and a broadcast from rank 0 never changes rank 0's.
            self.ddp = DistributedDataParallel(
                self.model,
                device_ids=[self.device] if self.device.type == "cuda" else None,
                gradient_as_bucket_view=True,
                forward_sync_buffers=False,
            )
            model = self.ddp
        if self.config.compile:
            model = torch.compile(model)
        self.reporter.open(resumed_from, self.config.epochs * self.sampler.steps_per_epoch, self.plan.global_batch)
        vote = distributed.StopVote()
        with StopSignals() as stop:
            while self.progress.epoch < self.config.epochs:
                self._train_epoch(model, stop, vote)
                self._finish_epoch()
                self.save_checkpoint()
                if distributed.any_rank(stop.requested, self.device):
                    raise TerminationRequested(f"stopped by signal at step {self.progress.step}; checkpoint written")
        return self._finish(resumed_from)

    def _train_epoch(self, model: Forward, stop: StopSignals, vote: distributed.StopVote) -> None:
        config, progress = self.config, self.progress
        steps = self.sampler.steps(progress.epoch, progress.position, self.device)
        show_bar = self.topology.is_main and sys.stderr.isatty()
        bar = tqdm(
            total=sum(step.samples for step in steps),
            unit="img",
            desc=f"epoch {progress.epoch + 1}/{config.epochs}",
            disable=not show_bar,
            leave=False,
        )
        running_loss = torch.zeros((), device=self.device)
        window_steps, window_samples, window_start = 0, 0, time.perf_counter()
        epoch_start = window_start
        for step in steps:
            self.optimizer.zero_grad(set_to_none=True)
            last = len(step.micro_batches) - 1
            for index, batch in enumerate(step.micro_batches):
                with self._gradient_sync(index == last), precision.autocast(self.precision, self.device):
                    loss = self._step_loss(model, batch, step.samples)
                loss.backward()
                running_loss += loss.detach()
            self.optimizer.step()
            self.scheduler.step()
            progress.step += 1
            progress.position += step.samples
            window_steps += 1
            window_samples += step.samples
            bar.update(step.samples)
            if progress.step % config.log_every == 0:
                now = time.perf_counter()
                window_loss = running_loss.item()  # the only host sync: once per log interval
                progress.epoch_loss_sum += window_loss
                progress.epoch_steps += window_steps
                mean_loss = distributed.all_sum_(torch.tensor([window_loss])).item() / self.topology.world_size
                learning_rate = float(self.scheduler.get_last_lr()[0])
                rate = window_samples / (now - window_start)
                self.reporter.interval(bar, progress, mean_loss / window_steps, learning_rate, rate, window_steps)
                running_loss.zero_()
                self.images_trained += window_samples
                window_steps, window_samples, window_start = 0, 0, now
            if vote.poll(stop.requested):
                self.training_seconds += time.perf_counter() - epoch_start
                self.save_checkpoint()
                raise TerminationRequested(f"stopped by signal at step {progress.step}; checkpoint written")
            if config.checkpoint_every and progress.step % config.checkpoint_every == 0:
                self.save_checkpoint()
        vote.settle()  # the epoch's end checks the signal itself, on every rank at once
        progress.epoch_loss_sum += running_loss.item()
        progress.epoch_steps += window_steps
        self.images_trained += window_samples
        bar.close()
        self.training_seconds += time.perf_counter() - epoch_start

    def _step_loss(self, model: Forward, batch: torch.Tensor, step_samples: int) -> torch.Tensor:
        """This micro-batch's share of the step's mean loss: DDP averages the ranks' gradients, so each rank's
        losses over the whole step sum to the mean over its own samples, or, on an epoch's short last step, where
        the ranks' shares differ, to world size x their sum / the step's samples."""
        logits, labels = model(self.train_x[batch]), self.train_y[batch]
        if step_samples == self.plan.global_batch:
            return F.cross_entropy(logits, labels) / self.plan.accumulation
        return F.cross_entropy(logits, labels, reduction="sum") * (self.topology.world_size / step_samples)

    def _gradient_sync(self, last_micro_batch: bool) -> contextlib.AbstractContextManager[None]:
        """DDP all-reduces the gradients on the step's last micro-batch only; the others just accumulate."""
        if self.ddp is None or last_micro_batch:
            return contextlib.nullcontext()
        return self.ddp.no_sync()

    def _finish_epoch(self) -> None:
        """Average the epoch's loss over ranks, measure test accuracy, start the next epoch."""
        progress = self.progress
        totals = torch.tensor([progress.epoch_loss_sum, float(progress.epoch_steps)], dtype=torch.float64)
        distributed.all_sum_(totals)
        accuracy = self.test_accuracy()
        record = {
            "epoch": progress.epoch + 1,
            "train_loss": float(totals[0] / max(1.0, float(totals[1]))),
            "test_accuracy": accuracy,
            "elapsed_seconds": round(time.perf_counter() - self.started, 3),
        }
        progress.history.append(record)
        self.reporter.epoch(progress.step, record)
        progress.epoch += 1
        progress.position = 0
        progress.epoch_loss_sum, progress.epoch_steps = 0.0, 0

    def test_accuracy(self) -> float:
        """Each rank scores its shard of the test set with rank 0's batch-norm statistics."""
        distributed.broadcast_buffers_(self.model)
        rank, world = self.topology.rank, self.topology.world_size
        images, labels = self.test_x[rank::world], self.splits.test_y[rank::world]
        predictions = evaluation.predict(self.model, images, EVAL_BATCH_SIZE, self.precision, self.device)
        counts = torch.tensor([int((predictions == labels).sum()), len(labels)], dtype=torch.float64)
        distributed.all_sum_(counts)
        return float(counts[0] / counts[1])

    # -- outputs ------------------------------------------------------------------------

    def _finish(self, resumed_from: int) -> dict[str, Any]:
        history = self.progress.history
        accuracy = history[-1]["test_accuracy"] if history else self.test_accuracy()
        summary = {
            "dataset": self.config.dataset,
            "model": self.model_name,
            "classes": list(self.splits.classes),
            "epochs": self.config.epochs,
            "steps": self.progress.step,
            "run": self.config.run_name,
            "world_size": self.topology.world_size,
            "global_batch_size": self.plan.global_batch,
            "micro_batch_size": self.plan.micro_batch,
            "gradient_accumulation_steps": self.plan.accumulation,
            "precision": self.precision,
            "seed": self.config.seed,
            "test_accuracy": accuracy,
            "images_trained": self.images_trained,
            "images_per_second": round(self.images_trained / self.training_seconds, 1)
            if self.training_seconds
            else 0.0,
            "wall_seconds": round(time.perf_counter() - self.started, 3),
            "resumed_from_step": resumed_from,
            "restart_count": self.topology.restart_count,
            "history": history,
        }
        if self.topology.is_main:
            out = self.config.output_dir
            metadata = {
                key: summary[key]
                for key in ("run", "dataset", "model", "classes", "epochs", "precision", "seed", "test_accuracy")
            }
            metadata["input_shape"] = list(self.splits.input_shape)
            if self.config.dataset == "synthetic":  # evaluate must regenerate the very same images
                metadata["synthetic"] = asdict(self.config.synthetic)
            outputs.save_model(out / outputs.MODEL_FILE, self.model, metadata)
            self._draw_curves()
            if self.artifacts:
                self._upload_history()
                self.artifacts.upload(out / outputs.MODEL_FILE, outputs.MODEL_FILE)
                self.artifacts.wait(UPLOAD_WAIT_SECONDS)  # so that the summary counts what failed
                summary["upload_failures"] = dict(sorted(self.artifacts.failures.items()))
            outputs.write_json(out / outputs.SUMMARY_FILE, summary)
            if self.artifacts:
                self.artifacts.upload(out / outputs.SUMMARY_FILE, outputs.SUMMARY_FILE)
        distributed.barrier()
        return summary


def run_definition(config: TrainConfig, model_name: str) -> dict[str, Any]:
    """What defines a run, keyed by the flag that sets it; a resume that disagrees on any of it is refused.

    The global batch is set by --global-batch-size or, without it, by --batch-size times the
    world size the run starts with: with --global-batch-size, --batch-size only caps the
    micro-batch (a memory limit, free to change between restarts).
    """
    definition: dict[str, Any] = {
        "--run-name": config.run_name,
        "--dataset": config.dataset,
        "--model": model_name,
        "--seed": config.seed,
        "--epochs": config.epochs,
        "--lr": config.lr,
        "--weight-decay": config.weight_decay,
        "--warmup-fraction": config.warmup_fraction,
    }
    if config.global_batch_size is not None:
        definition["--global-batch-size"] = config.global_batch_size
    else:
        definition["--batch-size"] = config.batch_size
    if config.dataset == "synthetic":
        shape = config.synthetic
        definition.update(
            {
                "--synthetic-shape": f"{shape.channels}x{shape.height}x{shape.width}",
                "--synthetic-size": shape.train_size,
                "--synthetic-classes": shape.classes,
            }
        )
    return definition


def train(config: TrainConfig, topology: Topology) -> dict[str, Any]:
    run = Run(config, topology)
    distributed.start(topology, run.device, datetime.timedelta(minutes=config.timeout_minutes))
    try:
        with distributed.peers_guarded():
            return run.execute()
    finally:
        run.reporter.close()
        if run.artifacts:  # the final results, or the SIGTERM checkpoint: inside the pod's shutdown window
            run.artifacts.close(UPLOAD_WAIT_SECONDS)
        run.ddp = None  # DDP must not outlive the process group: see distributed.stop
        distributed.stop()
