"""Results in S3, against a real S3 API on 127.0.0.1 (moto's server mode; no AWS).

The trainer runs for real under torchrun and reaches the server the way a pod reaches S3: boto3's
default credential chain and `AWS_ENDPOINT_URL`, nothing passed in code.
"""

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.conftest import free_port, read_summary, run_trainer
from trainer.artifacts import Location
from trainer.errors import UsageError

BUCKET = "models"
ARGS = ["train", "--dataset", "digits", "--epochs", "3", "--batch-size", "32", "--checkpoint-every", "20"]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    credentials = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    credentials["AWS_DEFAULT_REGION"] = "us-east-1"
    for name, value in {"AWS_ENDPOINT_URL": endpoint, **credentials}.items():
        monkeypatch.setenv(name, value)  # run_trainer passes the environment on, as a pod's would be
    client = boto3.client("s3")
    if BUCKET not in [bucket["Name"] for bucket in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=BUCKET)
    return client


def _keys(s3: Any, prefix: str) -> set[str]:
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix + "/").get("Contents", [])
    return {item["Key"].removeprefix(prefix + "/") for item in listed}


def test_a_run_uploads_its_results_and_checkpoints(s3: Any, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run_trainer([*ARGS, "--output-dir", str(out), "--artifact-uri", f"s3://{BUCKET}/jobs/a"], nproc=2)
    assert result.returncode == 0, result.stderr
    keys = _keys(s3, "jobs/a")
    assert {"model.pt", "summary.json", "metrics.jsonl", "training-curves.png"} <= keys
    assert any(key.startswith("tensorboard/events.out.tfevents.") for key in keys)
    steps = sorted(key for key in keys if key.startswith("checkpoints/") and key.endswith(".json"))
    assert steps and all(key.removesuffix(".json") + ".pt" in keys for key in steps)
    for name in ("model.pt", "summary.json"):
        assert s3.get_object(Bucket=BUCKET, Key=f"jobs/a/{name}")["Body"].read() == (out / name).read_bytes()
    assert "could not upload" not in result.stderr and "S3 is unreachable" not in result.stderr


def test_losing_the_local_checkpoints_resumes_from_s3_skipping_a_truncated_one(s3: Any, tmp_path: Path) -> None:
    out = tmp_path / "run"
    uris = ["--artifact-uri", f"s3://{BUCKET}/runs/b", "--checkpoint-uri", f"s3://{BUCKET}/checkpoints/b"]
    first = run_trainer([*ARGS, "--output-dir", str(out), *uris], nproc=2)
    assert first.returncode == 0, first.stderr
    final = read_summary(out)["steps"]
    shutil.rmtree(out)  # the whole shared volume is gone
    again = run_trainer([*ARGS, "--output-dir", str(out), *uris], nproc=2)
    assert again.returncode == 0, again.stderr
    assert read_summary(out)["resumed_from_step"] == final > 0

    shutil.rmtree(out)
    newest = f"checkpoints/b/step-{final:09d}.pt"
    payload = s3.get_object(Bucket=BUCKET, Key=newest)["Body"].read()
    s3.put_object(Bucket=BUCKET, Key=newest, Body=payload[: len(payload) // 2])  # a partial object
    third = run_trainer([*ARGS, "--output-dir", str(out), *uris], nproc=2)
    assert third.returncode == 0, third.stderr
    assert "corrupt or truncated" in third.stderr
    assert 0 < read_summary(out)["resumed_from_step"] < final


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
    assert (out / "model.pt").exists() and read_summary(out)["test_accuracy"] > 0.8


def test_a_bad_artifact_uri_is_one_line_naming_the_flag() -> None:
    with pytest.raises(UsageError, match=r"^--artifact-uri gs://models/x: use s3://BUCKET/PREFIX"):
        Location.parse("gs://models/x", "--artifact-uri")
    assert Location.parse("s3://models/jobs/a/", "--artifact-uri").key("model.pt") == "jobs/a/model.pt"


def test_evaluate_reads_the_model_from_s3_and_puts_its_report_next_to_it(s3: Any, tmp_path: Path) -> None:
    """The storage-less EvaluationJob: no shared volume, the run's model from the bucket, the report back to it."""
    out = tmp_path / "run"
    trained = run_trainer([*ARGS, "--output-dir", str(out), "--artifact-uri", f"s3://{BUCKET}/runs/e"], nproc=2)
    assert trained.returncode == 0, trained.stderr
    scratch = tmp_path / "scratch"
    args = ["evaluate", "--model-file", str(scratch / "model.pt"), "--json", str(scratch / "evaluation.json")]
    evaluated = run_trainer([*args, "--model-uri", f"s3://{BUCKET}/runs/e/model.pt", "--wait-minutes", "1"])
    assert evaluated.returncode == 0, evaluated.stderr
    assert {"evaluation.json", "confusion-matrix.png"} <= _keys(s3, "runs/e")
    missing = run_trainer([*args, "--model-uri", f"s3://{BUCKET}/runs/none/model.pt"])
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines()[-1] == (
        f"error: --model-uri s3://{BUCKET}/runs/none/model.pt: no such object (waited 0 minutes)"
    )
