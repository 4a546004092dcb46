"""An S3-compatible object store on 127.0.0.1 (moto's server), for sources and exports."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def object_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A local S3-compatible server (moto's) on 127.0.0.1, stopped after the test; the AWS
    SDK's own variables point pyarrow and polars at it. Yields an admin filesystem that may
    create buckets."""
    from moto.server import ThreadedMotoServer
    from pyarrow import fs

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        for name, value in {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }.items():
            monkeypatch.setenv(name, value)
        yield fs.S3FileSystem(
            endpoint_override=endpoint,
            access_key="test",
            secret_key="test",
            region="us-east-1",
            allow_bucket_creation=True,
        )
    finally:
        server.stop()
