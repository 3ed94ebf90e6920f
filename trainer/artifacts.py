"""A run's results in S3: uploads that never stall training, and the newest verified checkpoint back.

Rank 0 queues files for one background thread (a bounded queue: when S3 is slower than the run, the
upload of a file is skipped with a warning rather than the step waiting); the run's end and a SIGTERM
wait for the queue, within a bound. boto3 finds the pod's credentials itself (IRSA's web identity
token, or `AWS_*` variables) and honours `AWS_ENDPOINT_URL`; uploads are multipart above 64 MiB,
carry a SHA-256 checksum S3 verifies, and are retried with backoff. A checkpoint's manifest is
uploaded after its payload, so a checkpoint whose upload was cut off has no manifest and is never
resumed from. Nothing here deletes or replaces a local file: a failed upload is one warning line.
"""

import logging
import queue
import re
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, EndpointConnectionError

from trainer.atomic import write_atomically
from trainer.checkpoint import CheckpointManager
from trainer.errors import UsageError

log = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"
MANIFEST = re.compile(r"step-(\d{9})\.json$")
TRANSFER = TransferConfig(multipart_threshold=64 * 2**20, multipart_chunksize=64 * 2**20)
CLIENT = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=60)
POLL_SECONDS = 30
QUEUE_SIZE = 16
"""Files waiting for upload; beyond it a file is skipped (a newer checkpoint or the final upload follows)."""


@dataclass(frozen=True)
class Location:
    bucket: str
    prefix: str

    @classmethod
    def parse(cls, uri: str, flag: str) -> "Location":
        match = re.fullmatch(r"s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(/(.*))?", uri)
        if match is None:
            raise UsageError(f"{flag} {uri}: use s3://BUCKET/PREFIX (a bucket name in lower case)")
        return cls(match.group(1), (match.group(3) or "").strip("/"))

    def key(self, *parts: str) -> str:
        return "/".join(part for part in (self.prefix, *parts) if part)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


class ArtifactStore:
    """Rank 0's uploads to one S3 prefix, and its checkpoints' to and from another (default PREFIX/checkpoints)."""

    def __init__(self, location: Location, checkpoints: Location | None = None, client: Any = None) -> None:
        self.location = location
        self.checkpoints = checkpoints or Location(location.bucket, location.key(CHECKPOINTS))
        self.client = client or boto3.client("s3", config=CLIENT)
        self.pending: queue.Queue[tuple[Path, str, str] | None] = queue.Queue(QUEUE_SIZE)
        self.warned = False
        self.unreachable = False
        """Set when S3 cannot be reached: later uploads are skipped instead of each retrying for seconds."""
        self.worker = threading.Thread(target=self._upload_all, name="artifact-uploads", daemon=True)
        self.worker.start()

    def upload(self, path: Path, *key: str, to: Location | None = None) -> None:
        """Queue `path` for upload under the prefix (returns at once)."""
        location = to or self.location
        try:
            self.pending.put_nowait((path, location.bucket, location.key(*key)))
        except queue.Full:
            self._warn(f"upload queue full: {path.name} not uploaded this time (S3 is slower than the run)")

    def upload_checkpoint(self, payload: Path, manifest: Path) -> None:
        self.upload(payload, payload.name, to=self.checkpoints)
        self.upload(manifest, manifest.name, to=self.checkpoints)  # last: only a complete upload has one

    def close(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the queued uploads, then stop the worker."""
        self.pending.put(None)
        self.worker.join(timeout)
        if self.worker.is_alive():
            self._warn(f"uploads to {self.location} still running after {timeout:g} s; the local copies are kept")

    def _upload_all(self) -> None:
        while (item := self.pending.get()) is not None:
            path, bucket, key = item
            if self.unreachable or not path.exists():  # or pruned locally: a newer checkpoint is queued behind it
                continue
            try:
                self.client.upload_file(
                    str(path), bucket, key, ExtraArgs={"ChecksumAlgorithm": "SHA256"}, Config=TRANSFER
                )
            except (EndpointConnectionError, ConnectTimeoutError) as error:
                self.unreachable = True
                self._warn(
                    f"S3 is unreachable ({type(error).__name__}): nothing more is uploaded to {self.location} "
                    "by this run, and the local copies are kept"
                )
            except (BotoCoreError, ClientError, OSError) as error:
                self._warn(f"could not upload {path.name} to s3://{bucket}/{key} ({error}); the local copy is kept")

    def _warn(self, message: str) -> None:
        """One warning per run: an unreachable endpoint must not fill the log."""
        if not self.warned:
            self.warned = True
            log.warning("%s", message)

    def restore_newer_checkpoint(self, local: CheckpointManager) -> int | None:
        """Bring the newest verified checkpoint under the prefix that is newer than every local one into the
        local directory; returns its step, or None (nothing newer, or S3 unreachable: warned)."""
        newest_local = max(local.steps(), default=-1)
        try:
            steps = self._remote_steps()
        except (EndpointConnectionError, ConnectTimeoutError) as error:
            self.unreachable = True
            self._warn(
                f"S3 is unreachable ({type(error).__name__}): resuming from local checkpoints only, and "
                f"nothing is uploaded to {self.location} by this run"
            )
            return None
        except (BotoCoreError, ClientError) as error:
            self._warn(f"could not list checkpoints in {self.checkpoints} ({error}); resuming from local ones only")
            return None
        for step in (s for s in steps if s > newest_local):
            with tempfile.TemporaryDirectory() as staging:
                staged = CheckpointManager(Path(staging), local.definition, keep=1)
                payload, manifest = staged.paths(step)
                try:
                    for path in (payload, manifest):
                        key = self.checkpoints.key(path.name)
                        self.client.download_file(self.checkpoints.bucket, key, str(path))
                except (BotoCoreError, ClientError) as error:
                    log.warning(
                        "checkpoint step %d in %s is unreadable (%s); trying the previous one",
                        step,
                        self.checkpoints,
                        error,
                    )
                    continue
                verified = staged.newest()  # reports a corrupt or truncated payload, as for local ones
                if verified is None:
                    continue
                target_payload, target_manifest = local.paths(step)
                local.directory.mkdir(parents=True, exist_ok=True)
                write_atomically(target_payload, verified.payload)
                write_atomically(target_manifest, manifest.read_bytes())
                log.info("restored checkpoint step %d from %s", step, self.checkpoints)
                return step
        return None

    def _remote_steps(self) -> list[int]:
        """Steps with a manifest under the prefix, newest first."""
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.checkpoints.bucket, Prefix=self.checkpoints.key() + "/"
        )
        found = (MANIFEST.search(item["Key"]) for page in pages for item in page.get("Contents", []))
        return sorted((int(match.group(1)) for match in found if match), reverse=True)


def fetch(uri: str, path: Path, wait_minutes: float, flag: str = "--model-uri") -> None:
    """Download the object at `uri` to `path`, waiting up to `wait_minutes` for it to appear (a job that
    evaluates what another is still training). UsageError naming `flag` when it never does."""
    location = Location.parse(uri, flag)
    client = boto3.client("s3", config=CLIENT)
    deadline = time.monotonic() + 60 * wait_minutes
    while True:
        try:
            client.head_object(Bucket=location.bucket, Key=location.prefix)
            break
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") not in ("404", "NoSuchKey", "NotFound"):
                raise UsageError(f"{flag} {uri}: {error}") from None
        except (EndpointConnectionError, ConnectTimeoutError) as error:
            raise UsageError(f"{flag} {uri}: S3 is unreachable ({type(error).__name__})") from None
        if time.monotonic() >= deadline:
            raise UsageError(f"{flag} {uri}: no such object (waited {wait_minutes:g} minutes)")
        log.info("waiting for %s", uri)
        time.sleep(POLL_SECONDS)
    path.parent.mkdir(parents=True, exist_ok=True)
    client.download_file(location.bucket, location.prefix, str(path))


def put(path: Path, uri: str) -> None:
    """Upload one file now (a short job's report); a failure is one warning, the local file stays."""
    location = Location.parse(uri, "--model-uri")
    try:
        boto3.client("s3", config=CLIENT).upload_file(
            str(path), location.bucket, location.prefix, ExtraArgs={"ChecksumAlgorithm": "SHA256"}, Config=TRANSFER
        )
    except (BotoCoreError, ClientError, OSError) as error:
        log.warning("could not upload %s to %s (%s); the local copy is kept", path.name, uri, error)
