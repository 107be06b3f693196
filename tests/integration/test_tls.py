"""HTTPS serving: verbs and probes over TLS, certificate rotation without restart, client certs.

Certificates are made per test session with ``cryptography`` (a CA, server and client certs);
runway runs as a real process (``run_runway``) and is called with httpx verifying the CA.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from cryptography import x509

from app.config.security import TLSConfig
from app.tls import ReloadingTLS, TLSFilesError, not_after
from tests.certs import CA, Issued
from tests.reference import wire_cases
from tests.runway_process import run_runway

FILTER = next(c for c in wire_cases() if c["name"] == "nodecache-filter")["request"]

# --- certificates -----------------------------------------------------------------------------


@dataclass
class PKI:
    """Files of one test: CA bundle, server cert/key, client cert/key."""

    dir: Path
    ca: CA
    ca_file: Path
    server: Issued
    cert_file: Path
    key_file: Path
    client_cert: Path
    client_key: Path


def _write(path: Path, data: bytes) -> None:
    # Atomic replace, like a careful writer; the Secret-volume case is tested separately.
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


@pytest.fixture
def pki(tmp_path: Path) -> PKI:
    ca = CA("runway-test-ca")
    server = ca.issue("runway", server=True)
    client = ca.issue("kube-scheduler", server=False)
    files = {
        "ca.crt": ca.pem,
        "tls.crt": server.cert,
        "tls.key": server.key,
        "client.crt": client.cert,
        "client.key": client.key,
    }
    for name, data in files.items():
        _write(tmp_path / name, data)
    return PKI(
        tmp_path,
        ca,
        tmp_path / "ca.crt",
        server,
        tmp_path / "tls.crt",
        tmp_path / "tls.key",
        tmp_path / "client.crt",
        tmp_path / "client.key",
    )


def client_context(
    ca_file: Path, cert: Path | None = None, key: Path | None = None
) -> ssl.SSLContext:
    """An httpx ``verify`` context trusting ``ca_file``, presenting ``cert`` when given."""
    ctx = ssl.create_default_context(cafile=str(ca_file))
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key) if key else None)
    return ctx


def served_serial(port: int, ca_file: Path) -> int:
    """Serial number of the certificate a NEW connection to runway is shown (no SNI: an IP)."""
    ctx = ssl.create_default_context(cafile=str(ca_file))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def poll(condition: Callable[[], bool], what: str, within: float = 15.0) -> None:
    """Poll ``condition`` until true, or fail naming ``what``."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)  # polling interval


def write_config(pki: PKI, extra: str = "", reload: str = "0s") -> Path:
    path = pki.dir / "config.yaml"
    path.write_text(
        "server:\n  tls:\n"
        f"    certFile: {pki.cert_file}\n    keyFile: {pki.key_file}\n"
        f"    reloadInterval: {reload}\n{extra}"
    )
    return path


# --- serving ----------------------------------------------------------------------------------


def test_verbs_probes_and_metrics_over_https(pki: PKI) -> None:
    verify = client_context(pki.ca_file)
    config = write_config(pki)
    with run_runway(
        pki.dir, ["--config", str(config)], scheme="https", client_options={"verify": verify}
    ) as runway:
        assert runway.url.startswith("https://")
        with httpx.Client(base_url=runway.url, verify=verify, timeout=10) as http:
            assert http.get("/healthz").text == "ok"
            assert http.get("/readyz").status_code == 200
            assert "runway_extender_requests_total" in http.get("/metrics").text
            resp = http.post("/scheduler/filter", content=json.dumps(FILTER))
            assert resp.status_code == 200
            assert resp.json()["NodeNames"] == FILTER["NodeNames"]
        # Plain HTTP on the TLS port is not answered as HTTP.
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{runway.port}/healthz", timeout=5)
        # A client that does not trust the CA refuses the server.
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{runway.url}/healthz", verify=ssl.create_default_context(), timeout=5)


def test_cli_flags_turn_https_on(pki: PKI) -> None:
    # The Helm chart passes the Secret's files as flags.
    verify = client_context(pki.ca_file)
    args = ["--tls-cert-file", str(pki.cert_file), "--tls-key-file", str(pki.key_file)]
    with run_runway(pki.dir, args, scheme="https", client_options={"verify": verify}) as runway:
        assert served_serial(runway.port, pki.ca_file) == pki.server.serial


def test_rotated_files_are_served_to_new_connections(pki: PKI) -> None:
    verify = client_context(pki.ca_file)
    config = write_config(pki)
    with run_runway(
        pki.dir, ["--config", str(config)], scheme="https", client_options={"verify": verify}
    ) as runway:
        assert served_serial(runway.port, pki.ca_file) == pki.server.serial
        # An established keep-alive connection is left alone by the rotation.
        with httpx.Client(base_url=runway.url, verify=verify, timeout=10) as kept:
            assert kept.get("/healthz").status_code == 200

            renewed = pki.ca.issue("runway", server=True)
            _write(pki.key_file, renewed.key)
            _write(pki.cert_file, renewed.cert)
            poll(
                lambda: served_serial(runway.port, pki.ca_file) == renewed.serial,
                "the renewed certificate to be served",
            )
            assert kept.get("/healthz").status_code == 200
        assert httpx.get(f"{runway.url}/healthz", verify=verify, timeout=5).status_code == 200
        assert "TLS certificate reloaded" in runway.logs()


def test_half_written_rotation_keeps_the_last_good_certificate(pki: PKI) -> None:
    verify = client_context(pki.ca_file)
    config = write_config(pki)
    with run_runway(
        pki.dir, ["--config", str(config)], scheme="https", client_options={"verify": verify}
    ) as runway:
        renewed = pki.ca.issue("runway", server=True)
        _write(pki.cert_file, renewed.cert)  # the key is not there yet: cert and key mismatch
        poll(
            lambda: (
                served_serial(runway.port, pki.ca_file) == pki.server.serial
                and "cannot be loaded" in runway.logs()
            ),
            "the failed reload to be logged",
        )
        assert httpx.get(f"{runway.url}/healthz", verify=verify, timeout=5).status_code == 200
        _write(pki.key_file, renewed.key)
        poll(
            lambda: served_serial(runway.port, pki.ca_file) == renewed.serial,
            "the completed rotation to be served",
        )


def test_secret_volume_symlink_swap_is_picked_up(tmp_path: Path) -> None:
    # kubelet updates a Secret volume by re-pointing `..data` at a new timestamped directory.
    ca = CA("runway-test-ca")
    (tmp_path / "ca.crt").write_bytes(ca.pem)
    vol = tmp_path / "secret"
    vol.mkdir()

    def publish(issued: Issued, version: str) -> None:
        data = vol / version
        data.mkdir()
        (data / "tls.crt").write_bytes(issued.cert)
        (data / "tls.key").write_bytes(issued.key)
        link = vol / "..data_tmp"
        link.symlink_to(version)
        os.replace(link, vol / "..data")

    first = ca.issue("runway", server=True)
    publish(first, "..v1")
    for name in ("tls.crt", "tls.key"):
        (vol / name).symlink_to(f"..data/{name}")
    verify = client_context(tmp_path / "ca.crt")
    args = ["--tls-cert-file", str(vol / "tls.crt"), "--tls-key-file", str(vol / "tls.key")]
    config = tmp_path / "config.yaml"
    config.write_text("server:\n  tls:\n    reloadInterval: 0s\n")
    with run_runway(
        tmp_path,
        ["--config", str(config), *args],
        scheme="https",
        client_options={"verify": verify},
    ) as runway:
        assert served_serial(runway.port, tmp_path / "ca.crt") == first.serial
        second = ca.issue("runway", server=True)
        publish(second, "..v2")
        poll(
            lambda: served_serial(runway.port, tmp_path / "ca.crt") == second.serial,
            "the new Secret contents to be served",
        )


# --- client certificates ----------------------------------------------------------------------


def test_required_client_certificate(pki: PKI) -> None:
    with_cert = client_context(pki.ca_file, pki.client_cert, pki.client_key)
    extra = f"    clientCAFile: {pki.ca_file}\n    requireClientCert: true\n"
    config = write_config(pki, extra)
    with run_runway(
        pki.dir, ["--config", str(config)], scheme="https", client_options={"verify": with_cert}
    ) as runway:
        resp = httpx.post(
            f"{runway.url}/scheduler/filter",
            content=json.dumps(FILTER),
            verify=with_cert,
            timeout=10,
        )
        assert resp.status_code == 200
        # No client certificate: refused during the handshake.
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{runway.url}/healthz", verify=client_context(pki.ca_file), timeout=5)
        # A client certificate from another CA: refused too.
        other = CA("someone-else")
        stranger = other.issue("intruder", server=False)
        _write(pki.dir / "stranger.crt", stranger.cert)
        _write(pki.dir / "stranger.key", stranger.key)
        bad = client_context(pki.ca_file, pki.dir / "stranger.crt", pki.dir / "stranger.key")
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{runway.url}/healthz", verify=bad, timeout=5)


def test_optional_client_certificate_is_verified_when_presented(pki: PKI) -> None:
    config = write_config(pki, f"    clientCAFile: {pki.ca_file}\n")
    verify = client_context(pki.ca_file)
    with run_runway(
        pki.dir, ["--config", str(config)], scheme="https", client_options={"verify": verify}
    ) as runway:
        assert httpx.get(f"{runway.url}/healthz", verify=verify, timeout=5).status_code == 200
        good = client_context(pki.ca_file, pki.client_cert, pki.client_key)
        assert httpx.get(f"{runway.url}/healthz", verify=good, timeout=5).status_code == 200
        stranger = CA("someone-else").issue("intruder", server=False)
        _write(pki.dir / "stranger.crt", stranger.cert)
        _write(pki.dir / "stranger.key", stranger.key)
        bad = client_context(pki.ca_file, pki.dir / "stranger.crt", pki.dir / "stranger.key")
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{runway.url}/healthz", verify=bad, timeout=5)


# --- startup errors and the reload logic in-process ---------------------------------------------


def test_unreadable_files_stop_startup_with_the_field_named(pki: PKI) -> None:
    # A subprocess: `serve` configures process-wide logging.
    config = pki.dir / "bad.yaml"
    config.write_text(f"server:\n  tls:\n    certFile: {pki.dir}/missing.crt\n")
    done = subprocess.run(
        [sys.executable, "-m", "app", "serve", "--config", str(config), "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
    )
    assert done.returncode == 2, done.stderr
    assert "certFile=" in done.stderr and "missing.crt" in done.stderr


@pytest.mark.parametrize(
    ("tls", "message"),
    [
        ({"keyFile": "k"}, "keyFile is set but certFile is not"),
        ({"certFile": "c", "requireClientCert": True}, "requireClientCert needs clientCAFile"),
        ({"clientCAFile": "ca"}, "clientCAFile needs HTTPS"),
    ],
)
def test_incomplete_tls_config_is_refused(tls: dict[str, object], message: str) -> None:
    from app.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match=message):
        parse_config({"server": {"tls": tls}})


def test_flags_override_the_config_files() -> None:
    from app.config import RunwayConfig, with_overrides

    tls = {"certFile": "a.crt", "keyFile": "a.key", "reloadInterval": "1m"}
    base = RunwayConfig.model_validate({"server": {"tls": tls}})
    merged = with_overrides(base, {"server": {"tls": {"certFile": "b.crt"}}}).server.tls
    assert (merged.cert_file, merged.key_file, merged.reload_interval) == ("b.crt", "a.key", 60.0)


def test_reload_is_throttled_and_survives_bad_files(pki: PKI) -> None:
    now = [0.0]
    config = TLSConfig.model_validate(
        {"certFile": str(pki.cert_file), "keyFile": str(pki.key_file), "reloadInterval": "10s"}
    )
    tls = ReloadingTLS(config, monotonic=lambda: now[0])
    first = tls.current
    renewed = pki.ca.issue("runway", server=True)
    _write(pki.key_file, renewed.key)
    _write(pki.cert_file, renewed.cert)
    now[0] = 5.0
    assert not tls.maybe_reload() and tls.current is first  # checked at most every 10 s
    now[0] = 10.0
    assert tls.maybe_reload() and tls.current is not first
    assert not tls.maybe_reload(force=True)  # unchanged files: nothing to do
    _write(pki.cert_file, b"garbage")
    second = tls.current
    assert not tls.maybe_reload(force=True) and tls.current is second
    assert tls.reloads == 1


def test_missing_files_raise_a_config_error(pki: PKI) -> None:
    config = TLSConfig.model_validate({"certFile": str(pki.dir / "nope.crt")})
    with pytest.raises(TLSFilesError, match=r"nope\.crt"):
        ReloadingTLS(config)


# --- certificate expiry (issue #26: certificates expired silently) ----------------------------


def _metric(text: str, certificate: str) -> float:
    name = "runway_tls_certificate_expiry_timestamp_seconds"
    for line in text.splitlines():
        if line.startswith(f'{name}{{certificate="{certificate}"}}'):
            return float(line.split()[-1])
    raise AssertionError(f"no {name} for {certificate}")


def test_expiry_of_the_serving_ca_and_client_certificates_is_exported(pki: PKI) -> None:
    with_cert = client_context(pki.ca_file, pki.client_cert, pki.client_key)
    extra = f"    clientCAFile: {pki.ca_file}\n    requireClientCert: true\n"
    with run_runway(
        pki.dir,
        ["--config", str(write_config(pki, extra))],
        scheme="https",
        client_options={"verify": with_cert},
    ) as runway:
        text = httpx.get(f"{runway.url}/metrics", verify=with_cert, timeout=10).text
    client = x509.load_pem_x509_certificate(pki.client_cert.read_bytes())
    served = x509.load_pem_x509_certificate(pki.server.cert).not_valid_after_utc
    assert _metric(text, "serving") == served.timestamp()
    assert _metric(text, "client-ca") == pki.ca.cert.not_valid_after_utc.timestamp()
    assert _metric(text, "client") == client.not_valid_after_utc.timestamp()


def test_not_after_reads_utc_and_generalized_times_and_long_lengths(tmp_path: Path) -> None:
    # openssl's RSA certificate (lengths in two bytes); a year past 2049 is a GeneralizedTime
    for days, year in ((30, None), (365 * 40, 2066)):
        key, crt = tmp_path / "k.pem", tmp_path / "c.pem"
        subprocess.run(
            [
                *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes"),
                *("-keyout", str(key), "-out", str(crt), "-days", str(days), "-subj", "/CN=t"),
            ],
            check=True,
            capture_output=True,
        )
        want = x509.load_pem_x509_certificate(crt.read_bytes()).not_valid_after_utc
        assert not_after(b"junk\n" + crt.read_bytes()) == want.timestamp()
        assert year is None or want.year >= year - 1
    assert not_after(b"no certificate here") is None
    assert not_after(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----") is None


# --- the REST API on a port of its own (server.restPort) -----------------------------------


def test_rest_port_serves_people_without_the_schedulers_client_certificate(pki: PKI) -> None:
    from tests.runway_process import free_port

    rest_port = free_port()
    with_cert = client_context(pki.ca_file, pki.client_cert, pki.client_key)
    without = client_context(pki.ca_file)
    extra = (
        f"    clientCAFile: {pki.ca_file}\n    requireClientCert: true\n  restPort: {rest_port}\n"
    )
    config = write_config(pki, extra)
    with run_runway(
        pki.dir, ["--config", str(config)], scheme="https", client_options={"verify": with_cert}
    ) as runway:
        rest = f"https://127.0.0.1:{rest_port}"
        # The verbs' port: verbs, probes and metrics with the client certificate; no REST.
        verb = httpx.post(
            f"{runway.url}/scheduler/filter", content=json.dumps(FILTER), verify=with_cert
        )
        assert verb.status_code == 200
        assert httpx.get(f"{runway.url}/metrics", verify=with_cert).status_code == 200
        moved = httpx.get(f"{runway.url}/v1/queues", verify=with_cert)
        assert moved.status_code == 404 and f"port {rest_port}" in moved.json()["error"]
        assert httpx.get(f"{runway.url}/docs", verify=with_cert).status_code == 404
        # The REST port: no client certificate needed; the verbs are not there.
        assert httpx.get(f"{rest}/v1/queues", verify=without).status_code == 200
        assert httpx.get(f"{rest}/docs", verify=without).status_code == 200
        assert httpx.get(f"{rest}/ui/", verify=without).status_code == 200
        assert httpx.get(f"{rest}/healthz", verify=without).status_code == 200
        assert httpx.get(f"{rest}/metrics", verify=without).status_code == 404
        refused = httpx.post(f"{rest}/scheduler/filter", content=json.dumps(FILTER), verify=without)
        assert refused.status_code == 404 and f"port {runway.port}" in refused.json()["error"]
        # ...and the verbs' port still refuses a connection without one.
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{runway.url}/healthz", verify=without, timeout=5)
        assert f"https://127.0.0.1:{rest_port}" in runway.logs()
    # Stopped by SIGTERM: both listeners went down with the process.
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{rest}/healthz", verify=without, timeout=2)
