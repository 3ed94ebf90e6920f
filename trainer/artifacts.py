"""A run's results in S3 as the run goes: uploads that never stall training, and the run back on a new pod.

Rank 0 queues files for one background thread and goes on: a file already waiting is not queued twice (its
newest bytes go up when its turn comes) and an unchanged one is not sent again; the run's end and a SIGTERM
wait for the queue, within a bound. boto3 finds the pod's credentials itself (IRSA's web identity token, or
`AWS_*` variables) and honours `AWS_ENDPOINT_URL`; uploads are multipart above 64 MiB, carry a SHA-256 checksum
S3 verifies, and are retried with backoff. A checkpoint's manifest is uploaded after its payload, so a
checkpoint whose upload was cut off has no manifest and is never resumed from; once a manifest is up, the
checkpoints older than the newest `keep` complete ones are deleted, each manifest before its payload. A new pod
(an empty disk) gets back the newest checkpoint and the history the run uploaded, so its uploads extend that
history rather than replace it. Nothing here deletes or replaces a local file. Every failed upload or delete
is counted by kind (the file's name in S3: `metrics`, `checkpoints`, ..., and `checkpoint-deletes`), with one
warning line per kind.
"""

import logging
import queue
import re
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from boto3.exceptions import S3UploadFailedError
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, EndpointConnectionError

from eks_ddp.trainer.atomic import write_atomically
from eks_ddp.trainer.checkpoint import CheckpointManager
from eks_ddp.trainer.errors import UsageError
from eks_ddp.trainer.outputs import EVENTS_PREFIX, METRICS_FILE, TENSORBOARD_DIR

log = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints"
CHECKPOINT_DELETES = "checkpoint-deletes"
CHECKPOINT_KEY = re.compile(r"step-(\d{9})\.(json|pt)$")
TRANSFER = TransferConfig(multipart_threshold=64 * 2**20, multipart_chunksize=64 * 2**20)
CLIENT = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=60)
POLL_SECONDS = 30
UNREACHABLE = (EndpointConnectionError, ConnectTimeoutError)
UPLOAD_FAILED = (BotoCoreError, ClientError, S3UploadFailedError, OSError)
"""What a failed upload raises (boto3 wraps S3's error responses in S3UploadFailedError)."""


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


@dataclass(frozen=True)
class Upload:
    path: Path
    bucket: str
    key: str
    kind: str
    """What its failure is counted as."""


def _reason(error: Exception) -> str:
    """S3's own error, without the wrapper boto3 puts around a failed upload's."""
    return str(error.__context__ if isinstance(error, S3UploadFailedError) and error.__context__ else error)


def _stamp(path: Path) -> tuple[int, int] | None:
    """Size and modification time: a file whose stamp is the one uploaded has not changed since."""
    try:
        status = path.stat()
    except OSError:
        return None
    return status.st_size, status.st_mtime_ns


def _complete(keys: dict[int, list[str]]) -> list[int]:
    """Steps whose checkpoint has a manifest (listed first), newest first."""
    return sorted((step for step, found in keys.items() if found[0].endswith(".json")), reverse=True)


class ArtifactStore:
    """Rank 0's uploads to one S3 prefix, and its checkpoints' to and from another (default PREFIX/checkpoints),
    of which the newest `keep` complete ones are kept."""

    def __init__(self, location: Location, checkpoints: Location | None, keep: int, client: Any = None) -> None:
        self.location = location
        self.checkpoints = checkpoints or Location(location.bucket, location.key(CHECKPOINTS))
        self.keep = keep
        self.client = client or boto3.client("s3", config=CLIENT)
        self.pending: queue.Queue[Upload | threading.Event | None] = queue.Queue()
        self.waiting: set[tuple[str, str]] = set()
        """Keys queued and not yet taken by the worker."""
        self.uploaded: dict[Path, tuple[int, int] | None] = {}
        """Each file's stamp when it last went up (or came down: restored)."""
        self.held: set[Path] = set()
        """Files not to upload: their copy in S3 holds history this disk could not get back."""
        self.failures: Counter[str] = Counter()
        """Failed uploads (and deletes) by kind; a kind is listed, at 0, once something of it was queued."""
        self.warned: set[str] = set()
        self.unreachable = False
        """Set when S3 cannot be reached: later uploads are skipped (and counted) instead of each retrying."""
        self.worker = threading.Thread(target=self._upload_all, name="artifact-uploads", daemon=True)
        self.worker.start()

    def upload(self, path: Path, *key: str) -> None:
        """Queue `path` for upload under the prefix (returns at once); its kind is the key's first part's stem."""
        self._queue(Upload(path, self.location.bucket, self.location.key(*key), Path(key[0]).stem))

    def upload_checkpoint(self, payload: Path, manifest: Path) -> None:
        for path in (payload, manifest):  # the manifest last: only a complete upload has one
            self._queue(Upload(path, self.checkpoints.bucket, self.checkpoints.key(path.name), CHECKPOINTS))

    def _queue(self, item: Upload) -> None:
        self.failures[item.kind] += 0
        if (item.bucket, item.key) in self.waiting:
            return
        if item.path in self.uploaded and _stamp(item.path) == self.uploaded[item.path]:
            return
        self.waiting.add((item.bucket, item.key))
        self.pending.put(item)

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for what is queued now; whether it is all done."""
        done = threading.Event()
        self.pending.put(done)
        return done.wait(timeout)

    def close(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the queued uploads, stop the worker, and say what failed."""
        self.pending.put(None)
        self.worker.join(timeout)
        if self.worker.is_alive():
            log.warning("uploads to %s still running after %g s; the local copies are kept", self.location, timeout)
        if failed := {kind: count for kind, count in sorted(self.failures.items()) if count}:
            counts = ", ".join(f"{kind} {count}" for kind, count in failed.items())
            log.warning("failed uploads and deletes in S3 by this process: %s; the local copies are kept", counts)

    def _upload_all(self) -> None:
        while (item := self.pending.get()) is not None:
            if isinstance(item, threading.Event):
                item.set()
                continue
            self.waiting.discard((item.bucket, item.key))
            if item.path.exists():  # else pruned locally: a newer checkpoint is queued behind it
                self._upload(item)

    def _upload(self, item: Upload) -> None:
        if self.unreachable:
            self.failures[item.kind] += 1
            return
        if item.path in self.held:
            self._failed(item.kind, f"{item.path.name} is not uploaded (the one in S3 holds more history)")
            return
        stamp = _stamp(item.path)
        try:
            self.client.upload_file(
                str(item.path), item.bucket, item.key, ExtraArgs={"ChecksumAlgorithm": "SHA256"}, Config=TRANSFER
            )
        except UNREACHABLE as error:
            self._unreachable(error, f"nothing more is uploaded to {self.location} by this run")
            self.failures[item.kind] += 1
            return
        except UPLOAD_FAILED as error:
            if item.kind == CHECKPOINTS and not item.path.exists():
                return  # pruned locally while it went up (after the check above): a newer one is queued behind it
            self._failed(
                item.kind,
                f"could not upload {item.path.name} to s3://{item.bucket}/{item.key} ({_reason(error)}), "
                "the local copy is kept",
            )
            return
        self.uploaded[item.path] = stamp
        if item.kind == CHECKPOINTS and item.key.endswith(".json"):
            self._prune()

    def _failed(self, kind: str, message: str) -> None:
        """Count a failure; the first of each kind is a warning line, the others are counted only."""
        self.failures[kind] += 1
        if kind not in self.warned:
            self.warned.add(kind)
            log.warning("%s; later %s failures are only counted", message, kind)

    def _unreachable(self, error: Exception, consequence: str) -> None:
        """One line for the whole run: an unreachable endpoint must not fill the log."""
        if not self.unreachable:
            self.unreachable = True
            log.warning("S3 is unreachable (%s): %s, and the local copies are kept", type(error).__name__, consequence)

    def _prune(self) -> None:
        """Delete the checkpoints older than the newest `keep` complete ones (payloads left without a manifest
        too), each manifest first: a checkpoint never lacks its payload while it has one."""
        self.failures[CHECKPOINT_DELETES] += 0
        try:
            keys = self._checkpoint_keys()
        except (BotoCoreError, ClientError) as error:
            self._failed(CHECKPOINT_DELETES, f"could not list {self.checkpoints} to delete old checkpoints ({error})")
            return
        complete = _complete(keys)
        if len(complete) <= self.keep:
            return
        for step in sorted(step for step in keys if step < complete[self.keep - 1]):
            for key in keys[step]:
                try:
                    self.client.delete_object(Bucket=self.checkpoints.bucket, Key=key)
                except (BotoCoreError, ClientError) as error:
                    self._failed(CHECKPOINT_DELETES, f"could not delete s3://{self.checkpoints.bucket}/{key} ({error})")
                    break  # its payload stays while its manifest does

    def _checkpoint_keys(self) -> dict[int, list[str]]:
        """The checkpoints' keys under the prefix by step, each step's manifest first."""
        found: dict[int, list[str]] = {}
        for key in self._keys(self.checkpoints.key() + "/", self.checkpoints.bucket):
            if match := CHECKPOINT_KEY.search(key):
                found.setdefault(int(match.group(1)), []).append(key)
        return {step: sorted(keys, key=lambda key: key.endswith(".pt")) for step, keys in found.items()}

    def _keys(self, prefix: str, bucket: str) -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]

    def restore_newer_checkpoint(self, local: CheckpointManager) -> int | None:
        """Bring the newest verified checkpoint under the prefix that is newer than every local one into the
        local directory; returns its step, or None (nothing newer, or S3 unreachable: warned)."""
        newest_local = max(local.steps(), default=-1)
        try:
            keys = self._checkpoint_keys()
        except UNREACHABLE as error:
            self._unreachable(
                error, f"resuming from local checkpoints only, and nothing is uploaded to {self.location} by this run"
            )
            return None
        except (BotoCoreError, ClientError) as error:
            log.warning("could not list checkpoints in %s (%s); resuming from local ones only", self.checkpoints, error)
            return None
        for step in (s for s in _complete(keys) if s > newest_local):
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

    def restore_history(self, output_dir: Path) -> None:
        """Bring back the metrics.jsonl and TensorBoard event files the run uploaded that `output_dir` lacks (a new
        pod's empty disk), so the next upload extends the history in S3 instead of replacing it with a shorter
        one. If that fails, this process does not upload metrics.jsonl: the longer copy in S3 stays."""
        if self.unreachable:
            return
        bucket, metrics = self.location.bucket, self.location.key(METRICS_FILE)
        restored = 0
        try:
            found = [key for key in self._keys(metrics, bucket) if key == metrics]
            for key in found + self._keys(self.location.key(TENSORBOARD_DIR, EVENTS_PREFIX), bucket):
                target = output_dir / key[len(self.location.key()) :].lstrip("/")
                if not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    self.client.download_file(bucket, key, str(target))
                    self.uploaded[target] = _stamp(target)
                    restored += 1
        except UNREACHABLE as error:
            self._unreachable(error, f"nothing is uploaded to {self.location} by this run")
        except (BotoCoreError, ClientError, OSError) as error:
            self.held.add(output_dir / METRICS_FILE)
            log.warning(
                "could not restore the run's history from %s (%s); this process does not upload %s, so the longer "
                "one there is kept",
                self.location,
                error,
                METRICS_FILE,
            )
        else:
            if restored:
                log.info("restored %d history file(s) (metrics, TensorBoard events) from %s", restored, self.location)


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
        except UNREACHABLE as error:
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
    except UPLOAD_FAILED as error:
        log.warning("could not upload %s to %s (%s); the local copy is kept", path.name, uri, _reason(error))
