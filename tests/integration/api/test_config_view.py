"""GET /v1/config on a real process: the effective config, camelCase, secrets redacted."""

from __future__ import annotations

from pathlib import Path

import httpx
import yaml

from app.config import parse_config
from tests.runway_process import run_runway

TOKEN = "0123456789abcdef-secret-token"
FILE_TOKEN = "fedcba9876543210-file-token"


def test_effective_config_redacts_secrets_and_applies_flags(tmp_path: Path) -> None:
    token_file = tmp_path / "tokens.csv"
    token_file.write_text(f"{FILE_TOKEN},ops-user\n")
    config = tmp_path / "runway.yaml"
    config.write_text(
        "auth:\n"
        f"  staticTokens: [{TOKEN}]\n"
        f"  staticTokenFile: {token_file}\n"
        "  protectReadOnly: true\n"
        "waitForPodsReady:\n"
        "  timeout: 10m\n"
        "queues:\n"
        "  - name: research\n"
        "    reclaimMinRuntime: 1h\n"
    )
    with run_runway(tmp_path, ["--config", str(config), "--log-format", "json"]) as proc:
        assert httpx.get(f"{proc.url}/v1/config").status_code == 401
        resp = httpx.get(f"{proc.url}/v1/config", headers={"Authorization": f"Bearer {TOKEN}"})
    assert resp.status_code == 200
    body = resp.json()
    assert TOKEN not in resp.text and FILE_TOKEN not in resp.text
    assert body["auth"]["staticTokens"] == ["**********"]
    assert body["auth"]["staticTokenFile"] == str(token_file)  # named, never read out
    # as the file is written: camelCase keys, Go durations; the flags and shapes applied
    assert (body["server"]["port"], body["logging"]["format"]) == (proc.port, "json")
    assert body["waitForPodsReady"] == {
        **body["waitForPodsReady"],
        "enable": True,  # Kueue v1beta2 shape: the block's presence enables it
        "timeout": "10m",
        "recoveryTimeout": "10m",
    }
    assert body["queues"][0] == {**body["queues"][0], "name": "research", "reclaimMinRuntime": "1h"}
    assert body["kubernetes"]["leaderElection"]["leaseDuration"] == "15s"
    # what it says can be written back as a file (tokens aside) and means the same config
    body["auth"].pop("staticTokens")
    again = parse_config(yaml.safe_load(yaml.safe_dump(body)), "echo.yaml")
    assert (
        again.wait_for_pods_ready
        == parse_config(yaml.safe_load(config.read_text())).wait_for_pods_ready
    )
    assert again.server.port == proc.port
