"""A run's progress in the Prometheus text format, on the port every training pod declares (`--metrics-port`).

Each pod's first process (local rank 0) serves it, so every target the PodMonitor selects is up. The values are
the job's, the same on every pod (step, loss averaged over all ranks, throughput of all ranks, last checkpoint),
except those in PER_POD; the run_info's `node_rank` label tells the pods apart. A dashboard therefore takes the
`max` of a job's values over its pods, never their `sum`, which would count the job once per pod.

One registry of our own (no default process collectors), served by prometheus_client's threaded HTTP server,
so a scrape never waits for a training step. Names follow Prometheus' conventions: the `eksddp_trainer_` prefix,
base units in the name (`_seconds`), `_total` on counters; infra/addons/dashboards/ queries only these names (a test checks).
"""

import time
import urllib.request

from prometheus_client import CollectorRegistry, Counter, Gauge, Info, start_http_server
from prometheus_client.parser import text_string_to_metric_families

PREFIX = "eksddp_trainer"
PER_POD = (f"{PREFIX}_restarts_total", f"{PREFIX}_run_info")
"""Samples that describe the pod that serves them, not the job."""


class MetricsExport:
    """The gauges and counters of one run, served until `close()`."""

    def __init__(
        self,
        port: int,
        address: str,
        run_name: str,
        world_size: int,
        node_rank: int,
        restarts: int,
        total_steps: int,
        global_batch: int,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.steps, self.global_batch = total_steps, global_batch
        self.started, self.checkpointed = time.time(), 0.0

        def gauge(name: str, documentation: str) -> Gauge:
            return Gauge(f"{PREFIX}_{name}", documentation, registry=self.registry)

        Info(f"{PREFIX}_run", "The run this pod trains, and the pod's node rank in it", registry=self.registry).info(
            {"run_name": run_name, "world_size": str(world_size), "node_rank": str(node_rank)}
        )
        self.step = gauge("step", "Optimizer steps the run has taken (a resumed run continues its count)")
        self.total_steps = gauge("steps", "Optimizer steps the whole run takes")
        self.epoch = gauge("epoch", "The epoch being trained, from 1")
        self.loss = gauge("loss", "Training loss of the last log interval, mean over steps and ranks")
        self.learning_rate = gauge("learning_rate", "Learning rate after the last step")
        self.images_per_second = gauge("images_per_second", "Training throughput over the last log interval")
        self.eta = gauge("eta_seconds", "Time left at the last interval's throughput")
        self.test_accuracy = gauge("test_accuracy_ratio", "Test accuracy after the last finished epoch (0-1)")
        self.checkpoint_step = gauge("last_checkpoint_step", "Step of the newest checkpoint written (-1: none yet)")
        self.checkpoint_time = gauge("last_checkpoint_timestamp_seconds", "When it was written (Unix time)")
        age = gauge("last_checkpoint_age_seconds", "Seconds since the newest checkpoint (since start: none yet)")
        age.set_function(lambda: time.time() - (self.checkpointed or self.started))
        self.images = Counter(
            f"{PREFIX}_images",
            "Training images stepped over by all ranks since this pod's process started",
            registry=self.registry,
        )
        restarts_total = Counter(
            f"{PREFIX}_restarts", "Times torchrun restarted this pod's workers", registry=self.registry
        )
        restarts_total.inc(restarts)
        self.total_steps.set(total_steps)
        self.checkpoint_step.set(-1)
        self.server, self.thread = start_http_server(port, addr=address, registry=self.registry)

    @property
    def port(self) -> int:
        """The bound port (the one asked for, or the one the OS chose for 0)."""
        return int(self.server.server_port)

    def interval(
        self, step: int, epoch: int, loss: float, learning_rate: float, images_per_second: float, steps: int
    ) -> None:
        """One log interval of `steps` optimizer steps, ending at `step`."""
        self.step.set(step)
        self.epoch.set(epoch)
        self.loss.set(loss)
        self.learning_rate.set(learning_rate)
        self.images_per_second.set(images_per_second)
        self.images.inc(steps * self.global_batch)
        if images_per_second > 0:
            self.eta.set((self.steps - step) * self.global_batch / images_per_second)

    def epoch_end(self, test_accuracy: float) -> None:
        self.test_accuracy.set(test_accuracy)

    def checkpoint(self, step: int) -> None:
        self.checkpointed = time.time()
        self.checkpoint_step.set(step)
        self.checkpoint_time.set(self.checkpointed)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def scrape(url: str, timeout: float = 2.0) -> dict[str, float]:
    """One scrape as Prometheus would make it, parsed: sample name (labels folded in, sorted) -> value."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            samples[sample.name + (f"{{{labels}}}" if labels else "")] = sample.value
    return samples
