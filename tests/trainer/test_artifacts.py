"""Results in S3, against a real S3 API on 127.0.0.1 (moto's server mode; no AWS).

The trainer runs for real under torchrun and reaches the server the way a pod reaches S3: boto3's
default credential chain and `AWS_ENDPOINT_URL`, nothing passed in code.
"""

import json
import logging
import re
import shutil
import signal
from pathlib import Path
from typing import Any

import boto3
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from eks_ddp.trainer.artifacts import ArtifactStore, Location
from eks_ddp.trainer.checkpoint import CheckpointManager
from eks_ddp.trainer.errors import UsageError
from tests.conftest import Result, free_port, read_summary, run_trainer
from tests.trainer.s3_server import BUCKET, bucket_at, endpoint, s3  # noqa: F401 (fixtures)
from tests.trainer.launch import start, wait_for_checkpoint

pytestmark = pytest.mark.slow

ARGS = ["train", "--dataset", "digits", "--epochs", "3", "--batch-size", "32", "--checkpoint-every", "20"]


UPLOADED = "jobs/a"
"""The prefix of the run `uploaded` trains."""
ON_THE_UPLOADED_RUN = pytest.mark.xdist_group("test_artifacts.uploaded")
"""On the worker that has the run: `make test`'s workers (--dist loadgroup) would each train their own copy."""


@pytest.fixture(scope="module")
def uploaded(endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    """A 2-rank run with --artifact-uri s3://BUCKET/UPLOADED, trained once: the tests of what it uploads and of the
    evaluation that reads its model from the bucket (and only adds its report there) share it."""
    out = tmp_path_factory.mktemp("uploaded") / "run"
    with pytest.MonkeyPatch.context() as monkeypatch:
        bucket_at(endpoint, monkeypatch)
        uri = f"s3://{BUCKET}/{UPLOADED}"
        return out, run_trainer([*ARGS, "--output-dir", str(out), "--artifact-uri", uri], nproc=2)


def _keys(s3: Any, prefix: str) -> set[str]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/").get("Contents", [])
    return {item["Key"].removeprefix(prefix + "/") for item in listed}


def _logged_steps(s3: Any, prefix: str, scratch: Path) -> tuple[list[int], list[int]]:
    """The steps of the bucket's metrics.jsonl lines, and of its TensorBoard loss scalars as TensorBoard reads them
    (a resumed writer's purge step drops what the run cut off had written after its checkpoint)."""
    lines = s3.get_object(Bucket=BUCKET, Key=f"{prefix}/metrics.jsonl")["Body"].read().decode().splitlines()
    scratch.mkdir()
    for key in _keys(s3, f"{prefix}/tensorboard"):
        s3.download_file(BUCKET, f"{prefix}/tensorboard/{key}", str(scratch / key))
    events = EventAccumulator(str(scratch))
    events.Reload()
    return [json.loads(line)["step"] for line in lines], [event.step for event in events.Scalars("train/loss")]


@ON_THE_UPLOADED_RUN
def test_a_run_uploads_its_results_and_checkpoints(s3: Any, uploaded: tuple[Path, Result]) -> None:
    out, result = uploaded
    assert result.returncode == 0, result.stderr
    keys = _keys(s3, UPLOADED)
    assert {"model.pt", "summary.json", "metrics.jsonl", "training-curves.png"} <= keys
    assert any(key.startswith("tensorboard/events.out.tfevents.") for key in keys)
    steps = sorted(key for key in keys if key.startswith("checkpoints/") and key.endswith(".json"))
    assert steps and all(key.removesuffix(".json") + ".pt" in keys for key in steps)
    for name in ("model.pt", "summary.json"):
        assert s3.get_object(Bucket=BUCKET, Key=f"{UPLOADED}/{name}")["Body"].read() == (out / name).read_bytes()
    assert "could not upload" not in result.stderr and "S3 is unreachable" not in result.stderr


def test_losing_the_local_checkpoints_resumes_from_s3_skipping_a_truncated_one(s3: Any, tmp_path: Path) -> None:
    """In one process: rank 0 alone reads and chooses the checkpoint (the other ranks get its bytes), and a 2-rank
    resume from S3 is the empty-disk test's; torchrun and a second rank would add 14 CPU-seconds to the 3 runs."""
    out = tmp_path / "run"
    uris = ["--artifact-uri", f"s3://{BUCKET}/runs/b", "--checkpoint-uri", f"s3://{BUCKET}/checkpoints/b"]
    first = run_trainer([*ARGS, "--output-dir", str(out), *uris])
    assert first.returncode == 0, first.stderr
    final = read_summary(out)["steps"]
    shutil.rmtree(out)  # the whole shared volume is gone
    again = run_trainer([*ARGS, "--output-dir", str(out), *uris])
    assert again.returncode == 0, again.stderr
    assert read_summary(out)["resumed_from_step"] == final > 0

    shutil.rmtree(out)
    newest = f"checkpoints/b/step-{final:09d}.pt"
    payload = s3.get_object(Bucket=BUCKET, Key=newest)["Body"].read()
    s3.put_object(Bucket=BUCKET, Key=newest, Body=payload[: len(payload) // 2])  # a partial object
    third = run_trainer([*ARGS, "--output-dir", str(out), *uris])
    assert third.returncode == 0, third.stderr
    assert "corrupt or truncated" in third.stderr
    assert 0 < read_summary(out)["resumed_from_step"] < final


def test_a_pod_stopped_by_sigterm_then_replaced_on_an_empty_disk_keeps_the_whole_history_in_s3(
    s3: Any, tmp_path: Path
) -> None:
    """The storage-less stack (Pulumi.cpu.yaml): the pod's disk is scratch space, so what lasts is in the bucket."""
    disk = tmp_path / "pod"
    uris = ["--artifact-uri", f"s3://{BUCKET}/runs/h", "--checkpoint-uri", f"s3://{BUCKET}/checkpoints/h"]
    args = [*ARGS[:3], "--epochs", "2", "--batch-size", "16", "--log-every", "5", "--checkpoint-every", "10"]
    args += ["--keep-checkpoints", "2", "--output-dir", str(disk / "run"), "--checkpoint-dir", str(disk / "ckpt")]
    args += uris
    launcher = start(args, nproc=2)
    wait_for_checkpoint(disk / "ckpt", launcher)
    launcher.send_signal(signal.SIGTERM)  # the kubelet, to the pod's PID 1
    stderr = launcher.communicate(timeout=120)[1]
    stopped = re.search(r"stopped by signal at step (\d+)", stderr)
    assert stopped is not None, stderr[-3000:]
    at = int(stopped.group(1))
    assert not {"model.pt", "summary.json"} & _keys(s3, "runs/h")  # the run has not finished ...
    before = list(range(5, at + 1, 5))
    assert _logged_steps(s3, "runs/h", tmp_path / "events-1") == (before, before)  # ... and its history is there

    shutil.rmtree(disk)  # the pod is gone with its disk; its replacement starts empty
    resumed = run_trainer(args, nproc=2)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = read_summary(disk / "run")
    assert summary["resumed_from_step"] == at and "restored 2 history file(s)" in resumed.stderr
    every = list(range(5, summary["steps"] + 1, 5))
    assert _logged_steps(s3, "runs/h", tmp_path / "events-2") == (every, every)  # each step once, from the first
    checkpoints = sorted(_keys(s3, "checkpoints/h"))
    assert [key.split(".")[-1] for key in checkpoints] == ["json", "pt"] * 2  # --keep-checkpoints, both complete
    assert checkpoints[-1] == f"step-{summary['steps']:09d}.pt"
    assert set(summary["upload_failures"]) == {"checkpoint-deletes", "checkpoints", "metrics", "model"} | {
        "tensorboard",
        "training-curves",
    }
    assert not any(summary["upload_failures"].values()), summary["upload_failures"]


def test_every_failed_upload_is_counted_by_kind_with_one_warning_line_per_kind(
    s3: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    metrics, model = tmp_path / "metrics.jsonl", tmp_path / "model.pt"
    model.write_bytes(b"weights")
    local = CheckpointManager(tmp_path / "checkpoints", {"--run-name": "r"}, keep=3)
    store = ArtifactStore(Location("no-such-bucket", "runs/f"), None, keep=1, client=s3)
    caplog.set_level(logging.WARNING, logger="eks_ddp.trainer.artifacts")
    for step in (10, 20, 30):  # what the trainer queues at each checkpoint
        metrics.write_text(f'{{"step": {step}}}\n')
        store.upload(metrics, "metrics.jsonl")
        local.save(step, {"step": step})
        store.upload_checkpoint(*local.paths(step))
        assert store.wait(30)
    store.upload(model, "model.pt")
    store.close(30)
    assert store.failures == {"metrics": 3, "checkpoints": 6, "model": 1}
    missing = "An error occurred (NoSuchBucket) when calling the PutObject operation: "
    missing += "The specified bucket does not exist"
    assert [r.getMessage() for r in caplog.records if r.name == "eks_ddp.trainer.artifacts"] == [
        f"could not upload {name} to s3://no-such-bucket/runs/f/{key} ({missing}), the local copy is kept; later "
        f"{kind} failures are only counted"
        for name, key, kind in [
            ("metrics.jsonl", "metrics.jsonl", "metrics"),
            ("step-000000010.pt", "checkpoints/step-000000010.pt", "checkpoints"),
            ("model.pt", "model.pt", "model"),
        ]
    ] + ["failed uploads and deletes in S3 by this process: checkpoints 6, metrics 3, model 1; the local copies are "
         "kept"]


def test_a_pod_that_cannot_get_the_history_back_leaves_the_longer_one_in_s3(
    s3: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    history = b'{"step": 5}\n{"step": 10}\n'
    s3.put_object(Bucket=BUCKET, Key="runs/g/metrics.jsonl", Body=history)
    s3.put_object(Bucket=BUCKET, Key="runs/g/tensorboard/events.out.tfevents.1.pod.1.0", Body=b"events")
    output = tmp_path / "run"
    output.mkdir()
    (output / "tensorboard").write_bytes(b"")  # a file where the events go: they cannot come back
    store = ArtifactStore(Location(BUCKET, "runs/g"), None, keep=1, client=s3)
    caplog.set_level(logging.WARNING, logger="eks_ddp.trainer.artifacts")
    store.restore_history(output)
    (output / "metrics.jsonl").write_text('{"step": 15}\n')  # only what this pod records from its checkpoint on
    store.upload(output / "metrics.jsonl", "metrics.jsonl")
    store.close(30)
    assert s3.get_object(Bucket=BUCKET, Key="runs/g/metrics.jsonl")["Body"].read() == history
    assert store.failures == {"metrics": 1}
    restore, held, counted = (r.getMessage() for r in caplog.records if r.name == "eks_ddp.trainer.artifacts")
    assert restore.startswith(f"could not restore the run's history from s3://{BUCKET}/runs/g (")
    assert restore.endswith("this process does not upload metrics.jsonl, so the longer one there is kept")
    assert held.startswith("metrics.jsonl is not uploaded (the one in S3 holds more history)")
    assert counted.startswith("failed uploads and deletes in S3 by this process: metrics 1;")


class _PrunedWhileUploading:
    """S3 through moto, but each file vanishes just before boto3 opens it: the trainer's rotation of its local
    checkpoints won the race against the upload thread."""

    def __init__(self, s3: Any) -> None:
        self.s3 = s3

    def upload_file(self, filename: str, *args: Any, **kwargs: Any) -> None:
        Path(filename).unlink()
        self.s3.upload_file(filename, *args, **kwargs)


def test_a_checkpoint_pruned_locally_while_it_goes_up_is_no_failure(
    s3: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Seen once in a full `make test`: a run's summary counted a failed checkpoint upload, though nothing was lost."""
    payload, manifest = tmp_path / "step-000000010.pt", tmp_path / "step-000000010.json"
    payload.write_bytes(b"state")
    manifest.write_text("{}")
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"step": 10}\n')
    store = ArtifactStore(Location(BUCKET, "runs/p"), None, keep=2, client=_PrunedWhileUploading(s3))
    caplog.set_level(logging.WARNING, logger="eks_ddp.trainer.artifacts")
    store.upload_checkpoint(payload, manifest)
    store.upload(metrics, "metrics.jsonl")  # any other file that vanishes is still a failure
    store.close(30)
    assert store.failures == {"checkpoints": 0, "metrics": 1}
    assert [r.getMessage().split(" (")[0] for r in caplog.records][:1] == [
        f"could not upload metrics.jsonl to s3://{BUCKET}/runs/p/metrics.jsonl"
    ]


def test_an_unreachable_endpoint_warns_once_and_the_run_keeps_its_local_results(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    out = tmp_path / "run"
    result = run_trainer([*ARGS, "--output-dir", str(out), "--artifact-uri", f"s3://{BUCKET}/jobs/c"], nproc=2)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    warnings = [line for line in lines if "S3 is unreachable" in line or "could not upload" in line]
    assert len(warnings) == 1, warnings
    assert "resuming from local checkpoints only, and nothing is uploaded to s3://models/jobs/c" in warnings[0]
    summary = read_summary(out)
    assert (out / "model.pt").exists() and summary["test_accuracy"] > 0.8
    failures = summary["upload_failures"]  # every upload the run skipped, though warned once
    assert failures["model"] == 1 and failures["checkpoints"] >= 2 and failures["metrics"] >= 1, failures


def test_a_bad_artifact_uri_is_one_line_naming_the_flag() -> None:
    with pytest.raises(UsageError, match=r"^--artifact-uri gs://models/x: use s3://BUCKET/PREFIX"):
        Location.parse("gs://models/x", "--artifact-uri")
    assert Location.parse("s3://models/jobs/a/", "--artifact-uri").key("model.pt") == "jobs/a/model.pt"


@ON_THE_UPLOADED_RUN
def test_evaluate_reads_the_model_from_s3_and_puts_its_report_next_to_it(
    s3: Any, uploaded: tuple[Path, Result], tmp_path: Path
) -> None:
    """The storage-less EvaluationJob: no shared volume, the run's model from the bucket, the report back to it."""
    trained = uploaded[1]
    assert trained.returncode == 0, trained.stderr
    scratch = tmp_path / "scratch"
    args = ["evaluate", "--model-file", str(scratch / "model.pt"), "--json", str(scratch / "evaluation.json")]
    evaluated = run_trainer([*args, "--model-uri", f"s3://{BUCKET}/{UPLOADED}/model.pt", "--wait-minutes", "1"])
    assert evaluated.returncode == 0, evaluated.stderr
    assert {"evaluation.json", "confusion-matrix.png"} <= _keys(s3, UPLOADED)
    missing = run_trainer([*args, "--model-uri", f"s3://{BUCKET}/runs/none/model.pt"])
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines()[-1] == (
        f"error: --model-uri s3://{BUCKET}/runs/none/model.pt: no such object (waited 0 minutes)"
    )
