"""The model bucket's role allows exactly the S3 calls the trainer makes (recorded against moto's S3 server)."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from infra.model_bucket import access_policy
from tests.conftest import free_port
from trainer.artifacts import ArtifactStore, Location
from trainer.checkpoint import CheckpointManager

# The IAM action each S3 API operation needs (AWS "Actions, resources, and condition keys for Amazon S3").
ACTION = {
    "PutObject": "s3:PutObject", "CreateMultipartUpload": "s3:PutObject", "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject", "AbortMultipartUpload": "s3:AbortMultipartUpload",
    "ListObjectsV2": "s3:ListBucket", "HeadObject": "s3:GetObject", "GetObject": "s3:GetObject",
}
# s3transfer aborts a multipart upload that failed part-way (s3transfer/upload.py): not on the happy path.
FAILURE_PATH = {"s3:AbortMultipartUpload"}


@pytest.fixture
def recorded_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, list[str]]]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3")
    client.create_bucket(Bucket="models")
    calls: list[str] = []
    client.meta.events.register("before-call.s3.*", lambda model, **_: calls.append(model.name))
    yield client, calls
    server.stop()


def test_the_policy_allows_what_the_trainer_calls_and_nothing_more(recorded_client: tuple[Any, list[str]],
                                                                   tmp_path: Path) -> None:
    client, calls = recorded_client
    local = CheckpointManager(tmp_path / "checkpoints", {"--run-name": "r"}, keep=2)
    local.save(20, {"weights": [1.0]})
    large = tmp_path / "model.pt"
    large.write_bytes(b"\0" * (65 * 2**20))  # above the 64 MiB multipart threshold
    store = ArtifactStore(Location("models", "runs/job/run"), Location("models", "checkpoints/job/run"), client)
    store.upload_checkpoint(*local.paths(20))
    store.upload(large, "model.pt")
    store.close(120)
    elsewhere = CheckpointManager(tmp_path / "restored", {"--run-name": "r"}, keep=2)
    restorer = ArtifactStore(Location("models", "runs/job/run"), Location("models", "checkpoints/job/run"), client)
    assert restorer.restore_newer_checkpoint(elsewhere) == 20
    restorer.close(10)

    used = {ACTION[call] for call in calls}
    assert {"CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "ListObjectsV2", "GetObject"} <= set(calls)
    allowed = {action for statement in access_policy("arn:aws:s3:::models")["Statement"]
               for action in statement["Action"]}
    assert allowed == used | FAILURE_PATH
