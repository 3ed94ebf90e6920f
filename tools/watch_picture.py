"""`python -m eks_ddp.tools.watch_picture`: the training dashboard's first panels, drawn from a real local run's metrics.

Runs the bundled trainer under torchrun here (2 ranks, digits) with its metrics port on 127.0.0.1, scrapes it
as Prometheus would every 0.2 s, evaluates the dashboard's own expressions (infra/addons/dashboards/training.json: one metric,
or one metric divided by another) on each scrape, and plots them with matplotlib. It is what Grafana shows for a
job, made without Grafana or a cluster.
"""

import argparse
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from eks_ddp.infra.addons.prometheus_monitoring import dashboards  # noqa: E402
from eks_ddp.trainer.metrics_export import scrape  # noqa: E402
from eks_ddp.workloads.training_pod import TRAINER_MODULE  # noqa: E402

PANELS = 4
TRAIN = ["--dataset", "digits", "--epochs", "40", "--batch-size", "16", "--log-every", "2", "--checkpoint-every", "60"]


def value(expression: str, samples: dict[str, float]) -> float | None:
    """A panel expression on one scrape: `metric{...}` or `metric{...} / metric{...}`, each maybe the max of its
    pods' values (labels ignored: one job, one pod here)."""
    names = [re.findall(r"[A-Za-z_:][\w:]*", re.sub(r"\{.*", "", term))[-1] for term in expression.split("/")]
    if any(name not in samples for name in names):
        return None
    result = samples[names[0]]
    return result / samples[names[1]] if len(names) == 2 else result


def record(seconds_limit: float = 240) -> list[tuple[float, dict[str, float]]]:
    """Scrapes of one local 2-rank run, with the seconds since the first."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    torchrun = str(Path(sys.executable).with_name("torchrun"))
    with tempfile.TemporaryDirectory() as output, tempfile.TemporaryFile("w+") as log:
        command = [
            torchrun,
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            TRAINER_MODULE,
            "train",
            *TRAIN,
            "--output-dir",
            output,
            "--metrics-port",
            str(port),
            "--metrics-address",
            "127.0.0.1",
        ]
        # The log goes to a file: a pipe nobody reads fills up and stops the run.
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, text=True)
        scrapes, start, deadline = [], time.monotonic(), time.monotonic() + seconds_limit
        while process.poll() is None and time.monotonic() < deadline:
            try:
                scrapes.append((time.monotonic() - start, scrape(f"http://127.0.0.1:{port}/metrics")))
            except OSError:
                pass  # not listening yet
            time.sleep(0.2)
        if process.poll() is None:
            process.kill()
        process.wait()
        log.seek(0)
        if process.returncode != 0:
            raise SystemExit(f"the local run failed (exit {process.returncode}):\n{log.read()[-2000:]}")
    return [(t, s) for t, s in scrapes if s.get("eksddp_trainer_step", 0) > 0]


def draw(scrapes: list[tuple[float, dict[str, float]]], output: Path) -> None:
    panels = dashboards()["training.json"]["panels"][:PANELS]
    figure, axes = plt.subplots(2, 2, figsize=(10, 6), constrained_layout=True)
    for panel, axis in zip(panels, axes.flat):
        expression = panel["targets"][0]["expr"]
        points = [(t, value(expression, s)) for t, s in scrapes]
        axis.plot([t for t, v in points if v is not None], [v for _, v in points if v is not None])
        axis.set_title(panel["title"])
        axis.set_xlabel("seconds")
        axis.grid(alpha=0.3)
    figure.suptitle(f"infra/addons/dashboards/training.json, evaluated on {len(scrapes)} scrapes of a local 2-rank run")
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=90)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eks_ddp.tools.watch_picture", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--output", type=Path, default=Path("docs/watch-training.png"))
    args = parser.parse_args(argv)
    scrapes = record()
    draw(scrapes, args.output)
    print(f"{args.output}: {len(scrapes)} scrapes over {scrapes[-1][0]:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
