"""A real S3 API on 127.0.0.1 for the trainer's tests (moto's server mode; no AWS), reached the way a pod reaches S3:
boto3's default credential chain and `AWS_ENDPOINT_URL`, nothing passed in code.

moto keeps its buckets in the process, not in a server: modules that run in one process share BUCKET, so each uses
prefixes of its own."""

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.conftest import free_port

BUCKET = "models"


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


def bucket_at(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A client of BUCKET, which exists, and the environment that points the trainer at it."""
    credentials = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    credentials["AWS_DEFAULT_REGION"] = "us-east-1"
    for name, value in {"AWS_ENDPOINT_URL": endpoint, **credentials}.items():
        monkeypatch.setenv(name, value)  # run_trainer passes the environment on, as a pod's would be
    client = boto3.client("s3")
    if BUCKET not in [bucket["Name"] for bucket in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def s3(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    return bucket_at(endpoint, monkeypatch)
