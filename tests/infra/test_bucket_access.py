"""The model bucket's role allows exactly the S3 calls the trainer makes, on the keys it makes them on (recorded
against moto's S3 server)."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from eks_ddp.infra.aws.model_bucket import CHECKPOINTS_PREFIX, access_policy
from eks_ddp.trainer.artifacts import ArtifactStore, Location
from eks_ddp.trainer.checkpoint import CheckpointManager
from tests.conftest import free_port

# The IAM action each S3 API operation needs (AWS "Actions, resources, and condition keys for Amazon S3").
ACTION = {
    "PutObject": "s3:PutObject", "CreateMultipartUpload": "s3:PutObject", "UploadPart": "s3:PutObject",
    "CompleteMultipartUpload": "s3:PutObject", "AbortMultipartUpload": "s3:AbortMultipartUpload",
    "ListObjectsV2": "s3:ListBucket", "HeadObject": "s3:GetObject", "GetObject": "s3:GetObject",
    "DeleteObject": "s3:DeleteObject",
}
# s3transfer aborts a multipart upload that failed part-way (s3transfer/upload.py): not on the happy path.
FAILURE_PATH = {"s3:AbortMultipartUpload"}


@pytest.fixture
def recorded_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, list[tuple[str, str]]]]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3")
    client.create_bucket(Bucket="models")
    calls: list[tuple[str, str]] = []  # (operation, key)
    client.meta.events.register(
        "before-parameter-build.s3.*", lambda model, params, **_: calls.append((model.name, params.get("Key", "")))
    )
    yield client, calls
    server.stop()


def test_the_policy_allows_what_the_trainer_calls_and_nothing_more(
    recorded_client: tuple[Any, list[tuple[str, str]]], tmp_path: Path
) -> None:
    client, calls = recorded_client
    local = CheckpointManager(tmp_path / "checkpoints", {"--run-name": "r"}, keep=3)
    output = tmp_path / "run"
    (output / "tensorboard").mkdir(parents=True)
    (output / "metrics.jsonl").write_text('{"step": 10}\n')
    (output / "tensorboard" / "events.out.tfevents.1.pod.1.0").write_bytes(b"events")
    (output / "model.pt").write_bytes(b"\0" * (65 * 2**20))  # above the 64 MiB multipart threshold
    store = ArtifactStore(Location("models", "runs/job/run"), Location("models", "checkpoints/job/run"), 2, client)
    for step in (10, 20, 30):  # with --keep-checkpoints 2, the third one's upload deletes the first
        local.save(step, {"weights": [float(step)]})
        store.upload_checkpoint(*local.paths(step))
    for name in ("metrics.jsonl", "tensorboard/events.out.tfevents.1.pod.1.0", "model.pt"):
        store.upload(output / name, *name.split("/"))
    store.close(120)
    new_pod = tmp_path / "new-pod"
    elsewhere = CheckpointManager(new_pod / "checkpoints", {"--run-name": "r"}, keep=2)
    restorer = ArtifactStore(Location("models", "runs/job/run"), Location("models", "checkpoints/job/run"), 2, client)
    assert restorer.restore_newer_checkpoint(elsewhere) == 30
    restorer.restore_history(new_pod / "run")
    restorer.close(10)
    assert (new_pod / "run" / "tensorboard" / "events.out.tfevents.1.pod.1.0").read_bytes() == b"events"

    operations = {operation for operation, _ in calls}
    multipart = {"CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"}
    assert multipart | {"ListObjectsV2", "GetObject", "DeleteObject"} <= operations
    statements = access_policy("arn:aws:s3:::models")["Statement"]
    allowed = {action for statement in statements for action in statement["Action"]}
    assert allowed == {ACTION[operation] for operation in operations} | FAILURE_PATH
    # Deletes: the oldest checkpoint only, its manifest first, and the role may delete under checkpoints/ only.
    deletes = [key for operation, key in calls if operation == "DeleteObject"]
    assert deletes == ["checkpoints/job/run/step-000000010.json", "checkpoints/job/run/step-000000010.pt"]
    (prune,) = [statement for statement in statements if "s3:DeleteObject" in statement["Action"]]
    assert prune["Action"] == ["s3:DeleteObject"] and prune["Resource"] == f"arn:aws:s3:::models/{CHECKPOINTS_PREFIX}*"
    assert all(key.startswith(CHECKPOINTS_PREFIX) for key in deletes)
