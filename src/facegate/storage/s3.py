"""S3Store: the ObjectStore port on S3 or anything speaking its protocol (MinIO, Ceph).

``FACEGATE_STORAGE_URL=s3://bucket?endpoint_url=http://minio:9000&region=us-east-1``;
credentials come from the standard AWS environment (``AWS_ACCESS_KEY_ID``...), never
from the URL. Two isolation layouts, invisible to callers (keys are the same):

- logical (default): every key in ``bucket``; a tenant's objects share the
  ``tenants/<tenant>/`` prefix that TenantStore builds.
- physical: ``tenant_bucket=facegate-{tenant}`` puts every ``tenants/<tenant>/...`` key
  in that tenant's own bucket (created on first use), so a bucket policy or per-tenant
  credentials can fence it off outside facegate too.

Big objects go up as multipart uploads (boto3 ``TransferConfig``); downloads can be
handed out as short-lived presigned URLs. botocore errors become storage errors, and every
call goes through the ``s3`` circuit breaker.
"""

from __future__ import annotations

import builtins
import io
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC
from typing import Any, BinaryIO, TypeVar, cast
from urllib.parse import parse_qs, urlsplit

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from facegate.errors import Unavailable
from facegate.resilience import BreakerConfig, CircuitBreaker
from facegate.storage.base import (
    CHUNK_SIZE,
    ObjectInfo,
    ObjectNotFound,
    StorageError,
    check_key,
    check_prefix,
)

T = TypeVar("T")
MIB = 1024 * 1024
_TENANT_KEY = re.compile(r"^tenants/([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)/")
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_SAFE_FILENAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_NOT_FOUND_CODES = {"404", "NoSuchKey", "NotFound", "NoSuchBucket"}


class S3Unavailable(StorageError, Unavailable):
    """S3 could not be reached or answered with a server error (503 to clients)."""


@dataclass(frozen=True)
class S3Options:
    """Where the objects go and how they travel; built from the storage URL."""

    bucket: str
    endpoint_url: str | None = None
    region: str = "us-east-1"
    tenant_bucket: str | None = None  # "facegate-{tenant}": one bucket per tenant
    presign_seconds: int = 300
    multipart_threshold: int = 16 * MIB
    multipart_chunksize: int = 16 * MIB
    timeout_seconds: float = 10.0

    @classmethod
    def from_url(cls, url: str) -> S3Options:
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc:
            raise StorageError(f"an S3 storage URL looks like s3://bucket?..., not {url!r}")
        query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
        known = {"endpoint_url", "region", "tenant_bucket", "presign_seconds"}
        known |= {"multipart_threshold", "multipart_chunksize", "timeout_seconds"}
        unknown = set(query) - known
        if unknown:
            raise StorageError(f"unknown S3 storage URL options: {sorted(unknown)}")
        options = cls(
            bucket=parts.netloc,
            endpoint_url=query.get("endpoint_url"),
            region=query.get("region", "us-east-1"),
            tenant_bucket=query.get("tenant_bucket"),
            presign_seconds=int(query.get("presign_seconds", 300)),
            multipart_threshold=int(query.get("multipart_threshold", 16 * MIB)),
            multipart_chunksize=int(query.get("multipart_chunksize", 16 * MIB)),
            timeout_seconds=float(query.get("timeout_seconds", 10.0)),
        )
        _check_bucket_name(options.bucket)
        if options.tenant_bucket is not None:
            _check_bucket_name(options.tenant_bucket.format(tenant="a"))
        return options


def _check_bucket_name(name: str) -> str:
    if not _BUCKET_NAME.fullmatch(name):
        raise StorageError(f"invalid S3 bucket name {name!r}")
    return name


class _ChunkReader(io.RawIOBase):
    """A read-only file over an iterator of chunks (boto3 uploads from file objects)."""

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        self._pending = b""
        self.total = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        self.total += size
        return size


class S3Store:
    """An ObjectStore over S3; see the module docstring for the two layouts."""

    def __init__(
        self,
        options: S3Options,
        *,
        breaker: CircuitBreaker,
        client: Any | None = None,
    ) -> None:
        self.options = options
        self.client = client or boto3.session.Session().client(
            "s3",
            endpoint_url=options.endpoint_url,
            region_name=options.region,
            config=Config(
                s3={"addressing_style": "path"},
                signature_version="s3v4",  # presigned URLs carry their expiry (SigV4)
                connect_timeout=options.timeout_seconds,
                read_timeout=options.timeout_seconds,
                retries={"max_attempts": 2, "mode": "standard"},
            ),
        )
        self.breaker = breaker
        self.transfer = TransferConfig(
            multipart_threshold=options.multipart_threshold,
            multipart_chunksize=options.multipart_chunksize,
            use_threads=False,  # the caller's thread is the concurrency unit already
        )
        self._ready_buckets: set[str] = set()
        self._lock = threading.Lock()

    @classmethod
    def from_url(cls, url: str, breaker: BreakerConfig) -> S3Store:
        """The store a ``s3://`` URL names, behind an ``s3`` breaker with ``breaker``'s
        threshold and cool-down (``FACEGATE_BREAKER_*``)."""
        return cls(S3Options.from_url(url), breaker=CircuitBreaker("s3", breaker))

    # -- plumbing --------------------------------------------------------------------

    def _call(self, function: Callable[[], T]) -> T:
        """Run one S3 operation through the breaker, translating botocore's errors."""
        self.breaker.before_call()
        try:
            result = function()
        except ClientError as exc:
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            if status >= 500:
                self.breaker.record_failure()
                raise S3Unavailable(f"S3 answered {status}") from exc
            self.breaker.record_success()
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in _NOT_FOUND_CODES:
                raise ObjectNotFound(code) from exc
            raise StorageError(f"S3 refused the request: {code}") from exc
        except BotoCoreError as exc:
            # Connection refused, timeouts, closed connections: S3 is unreachable.
            self.breaker.record_failure()
            raise S3Unavailable(f"S3 is unreachable ({type(exc).__name__})") from exc
        self.breaker.record_success()
        return result

    def bucket_for(self, key: str) -> str:
        """The bucket holding ``key``: its tenant's in the physical layout."""
        template = self.options.tenant_bucket
        match = _TENANT_KEY.match(key)
        if template is None or match is None:
            return self.options.bucket
        return _check_bucket_name(template.format(tenant=match.group(1)))

    def _writable_bucket(self, key: str) -> str:
        bucket = self.bucket_for(key)
        with self._lock:
            if bucket in self._ready_buckets:
                return bucket
        self.ensure_bucket(bucket)
        return bucket

    def ensure_bucket(self, bucket: str) -> None:
        """Create ``bucket`` unless it exists (remembered per process). Asking first lets
        credentials without CreateBucket use a bucket an operator made."""
        try:
            self._call(lambda: self.client.head_bucket(Bucket=bucket))
        except ObjectNotFound:
            arguments: dict[str, Any] = {"Bucket": bucket}
            if self.options.region != "us-east-1":
                location = {"LocationConstraint": self.options.region}
                arguments["CreateBucketConfiguration"] = location
            try:
                self._call(lambda: self.client.create_bucket(**arguments))
            except StorageError as exc:
                cause = exc.__cause__
                code = cause.response["Error"]["Code"] if isinstance(cause, ClientError) else ""
                if code != "BucketAlreadyOwnedByYou":  # another process made it meanwhile
                    raise
        with self._lock:
            self._ready_buckets.add(bucket)

    # -- the ObjectStore port ------------------------------------------------------

    def put(self, key: str, data: bytes) -> int:
        return self.put_stream(key, [data])

    def put_stream(self, key: str, chunks: Iterable[bytes]) -> int:
        check_key(key)
        bucket = self._writable_bucket(key)
        reader = _ChunkReader(chunks)
        # S3 makes an object visible only when its upload completes (a failed multipart
        # upload is aborted by boto3), so writes are atomic like LocalStore's.
        self._call(
            lambda: self.client.upload_fileobj(
                io.BufferedReader(reader, CHUNK_SIZE), bucket, key, Config=self.transfer
            )
        )
        return reader.total

    def get(self, key: str) -> bytes:
        with self.open(key) as handle:
            return handle.read()

    def open(self, key: str) -> BinaryIO:
        check_key(key)
        response = self._call(lambda: self.client.get_object(Bucket=self.bucket_for(key), Key=key))
        return cast(BinaryIO, response["Body"])

    def iter_chunks(self, key: str, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
        body = self.open(key)
        with body:
            while chunk := body.read(chunk_size):
                yield chunk

    def delete(self, key: str) -> bool:
        # S3 deletes are silent about missing keys; ask first to honour the port's answer.
        if not self.exists(key):
            return False
        self._call(lambda: self.client.delete_object(Bucket=self.bucket_for(key), Key=key))
        return True

    def list(self, prefix: str = "") -> list[str]:
        return [item.key for item in self.list_objects(prefix)]

    def list_objects(self, prefix: str = "") -> builtins.list[ObjectInfo]:
        check_prefix(prefix)
        found: dict[str, ObjectInfo] = {}
        for bucket in self._buckets_under(prefix):
            found.update((item.key, item) for item in self._list_bucket(bucket, prefix))
        return [found[key] for key in sorted(found)]

    def _buckets_under(self, prefix: str) -> builtins.list[str]:
        if self.options.tenant_bucket is None or _TENANT_KEY.match(prefix):
            return [self.bucket_for(prefix)]
        pattern = re.compile(
            "^" + re.escape(self.options.tenant_bucket).replace(r"\{tenant\}", "[a-z0-9-]+") + "$"
        )
        listed = self._call(lambda: self.client.list_buckets())
        names = [item["Name"] for item in listed.get("Buckets", [])]
        return [self.options.bucket, *(name for name in names if pattern.fullmatch(name))]

    def _list_bucket(self, bucket: str, prefix: str) -> builtins.list[ObjectInfo]:
        def pages() -> builtins.list[ObjectInfo]:
            paginator = self.client.get_paginator("list_objects_v2")
            found: builtins.list[ObjectInfo] = []
            for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
                found.extend(
                    ObjectInfo(item["Key"], int(item["Size"]), item["LastModified"].astimezone(UTC))
                    for item in page.get("Contents", [])
                )
            return found

        try:
            return self._call(pages)
        except ObjectNotFound:
            return []  # a tenant bucket not created yet holds nothing

    def size(self, key: str) -> int:
        check_key(key)
        head = self._call(lambda: self.client.head_object(Bucket=self.bucket_for(key), Key=key))
        return int(head["ContentLength"])

    def exists(self, key: str) -> bool:
        try:
            self.size(key)
        except ObjectNotFound:
            return False
        return True

    # -- beyond the port -------------------------------------------------------------

    def presigned_url(
        self, key: str, expires_seconds: int | None = None, *, filename: str | None = None
    ) -> str:
        """A GET URL for ``key`` valid ``expires_seconds`` (default: the URL's
        ``presign_seconds``); signing is local, so this never touches the network."""
        check_key(key)
        seconds = expires_seconds or self.options.presign_seconds
        params = {"Bucket": self.bucket_for(key), "Key": key}
        if filename is not None:
            if not _SAFE_FILENAME.fullmatch(filename):
                raise StorageError(f"unsafe download file name {filename!r}")
            params["ResponseContentDisposition"] = f'attachment; filename="{filename}"'
        url: str = self.client.generate_presigned_url(
            "get_object",
            Params=params,
            ExpiresIn=seconds,
        )
        return url
