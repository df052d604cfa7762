"""The serving certificate of secure metrics: self-signed, or mounted and re-read.

Real TLS handshakes on loopback: the certificate a client is shown is what counts, not
what the object says it loaded."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry

from dynamo_pool_operator.runtime.serving.auth import DelegatedAuth
from dynamo_pool_operator.runtime.serving.server import Probes, ProbeServer
from dynamo_pool_operator.runtime.serving.tls import (
    CertificateError,
    ServingCertificate,
    self_signed,
)
from tests.unit.runtime.client.fake import FakeClient


def write(directory: Path, host: str) -> None:
    cert, key = self_signed([host])
    (directory / "tls.crt").write_bytes(cert)
    (directory / "tls.key").write_bytes(key)


async def shown_hosts(port: int) -> list[str]:
    """The DNS names of the certificate a client is shown on `port`."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
        await writer.wait_closed()
    cert = x509.load_der_x509_certificate(der)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return san.get_values_for_type(x509.DNSName)


async def serving(tls: ServingCertificate) -> AsyncIterator[int]:
    async def handle(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=tls.context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def test_self_signed_serves_a_certificate_for_this_host() -> None:
    tls = ServingCertificate()
    async for port in serving(tls):
        hosts = await shown_hosts(port)
        assert "localhost" in hosts
    assert tls.reload_if_changed() is False  # nothing mounted, nothing to re-read


async def test_a_mounted_certificate_is_served_and_replaced_when_it_changes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write(tmp_path, "first.test")
    tls = ServingCertificate(tmp_path)
    async for port in serving(tls):
        assert await shown_hosts(port) == ["first.test"]
        assert tls.reload_if_changed() is False  # same content: not reloaded

        write(tmp_path, "second.test")  # what the kubelet does when the Secret changes
        assert tls.reload_if_changed() is True
        assert await shown_hosts(port) == ["second.test"]
        assert tls.reloads == 1

        # A broken new file keeps the certificate in use, and says why.
        (tmp_path / "tls.key").write_text("not a key")
        caplog.set_level(logging.WARNING)
        assert tls.reload_if_changed() is False
        assert await shown_hosts(port) == ["second.test"]
        assert "keeping the current metrics certificate" in caplog.text


def test_a_missing_mount_fails_with_what_to_mount(tmp_path: Path) -> None:
    with pytest.raises(CertificateError, match=r"mount a kubernetes.io/tls Secret"):
        ServingCertificate(tmp_path / "absent")


def test_a_key_that_does_not_match_fails_at_start(tmp_path: Path) -> None:
    write(tmp_path, "one.test")
    other_cert, _ = self_signed(["two.test"])
    (tmp_path / "tls.crt").write_bytes(other_cert)
    with pytest.raises(CertificateError, match="matching the certificate"):
        ServingCertificate(tmp_path)


class AcceptsAll(FakeClient):
    """A reviewer that lets every token through: who may scrape is not the point here
    (tests/integration/security/test_secure_metrics.py asks a real API server)."""

    async def create(self, res: Any, body: dict[str, Any], *_: Any, **__: Any) -> dict[str, Any]:
        if body["kind"] == "TokenReview":
            return {"status": {"authenticated": True, "user": {"username": "prom"}}}
        return {"status": {"allowed": True}}


async def scrape_status(port: int) -> int:
    """A whole HTTPS scrape of the metrics server: handshake, request, answer."""
    headers = {"Authorization": "Bearer any"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"https://127.0.0.1:{port}/metrics", headers=headers, ssl=False) as r,
    ):
        return r.status


async def test_a_mismatched_certificate_and_key_leave_the_served_one_working(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The operator's metrics server over a mounted certificate: a reload of a pair
    that does not match must change nothing a scraper sees. Loading it into the live
    context took the new certificate and then refused the key, leaving a certificate
    without its key: every later handshake failed while the log said the old one was
    kept."""
    write(tmp_path, "first.test")
    tls = ServingCertificate(tmp_path)
    server = ProbeServer(
        Probes(),
        CollectorRegistry(),
        health_address="0",
        metrics_address="127.0.0.1:0",
        metrics_tls=tls,
        metrics_auth=DelegatedAuth(AcceptsAll()),
    )
    await server.start()
    caplog.set_level(logging.WARNING)
    try:
        port = server.bound["metrics"][1]
        assert await scrape_status(port) == 200
        first_cert = (tmp_path / "tls.crt").read_bytes()

        # A new certificate next to the old key (a Secret updated by hand, half done).
        second_cert, second_key = self_signed(["second.test"])
        (tmp_path / "tls.crt").write_bytes(second_cert)
        assert tls.reload_if_changed() is False
        assert "keeping the current metrics certificate" in caplog.text
        assert await shown_hosts(port) == ["first.test"]
        assert await scrape_status(port) == 200

        # The old certificate with a new key.
        (tmp_path / "tls.crt").write_bytes(first_cert)
        (tmp_path / "tls.key").write_bytes(second_key)
        assert tls.reload_if_changed() is False
        assert await shown_hosts(port) == ["first.test"]
        assert await scrape_status(port) == 200
        assert tls.reloads == 0

        # A matching pair is taken at the next reload, for new connections.
        (tmp_path / "tls.crt").write_bytes(second_cert)
        assert tls.reload_if_changed() is True
        assert await shown_hosts(port) == ["second.test"]
        assert await scrape_status(port) == 200
        assert tls.reloads == 1
    finally:
        await server.stop()
