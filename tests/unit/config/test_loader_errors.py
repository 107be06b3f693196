"""Config errors as an operator reads them: file, line, field path, value, and a hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import ConfigError, ConfigUnreadable, load_config, with_overrides
from app.config.model import RunwayConfig


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "waitForPodsReady:\n  timeout: 300\n",
            "runway.yaml:2: waitForPodsReady.timeout: a duration needs a unit, as Kueue and KAI "
            'write them: write "300s" for 300 seconds (or "5m", "1h30m") (got 300)',
        ),
        (
            "queues:\n  - name: a\n    preemptMinRuntime: 1.5\n",
            "runway.yaml:3: queues[0].preemptMinRuntime: a duration needs a unit, as Kueue and "
            'KAI write them: write "1.5s" for 1.5 seconds (or "5m", "1h30m") (got 1.5)',
        ),
        (
            "kubernetes:\n  leaderElection:\n    leaseDuration: 0\n",
            "runway.yaml:3: kubernetes.leaderElection.leaseDuration: a duration needs a unit, as "
            'Kueue and KAI write them: write "0s" for 0 seconds (or "5m", "1h30m") (got 0)',
        ),
        (
            "preemption:\n  gateTimeout: '300'\n",
            "runway.yaml:2: preemption.gateTimeout: invalid duration '300': a duration needs a "
            'unit, as Kueue and KAI write them: write "300s" for 300 seconds (or "5m", "1h30m") '
            "(got '300')",
        ),
        (
            "waitForPodReady:\n  timeout: 5m\n",
            "runway.yaml:1: waitForPodReady: unknown field; did you mean 'waitForPodsReady'?",
        ),
        (
            "waitForPodsReady:\n  timeout: 5m\n  recoveryTimout: 1m\n",
            "runway.yaml:3: waitForPodsReady.recoveryTimout: unknown field; did you mean "
            "'recoveryTimeout'? (got '1m')",
        ),
        (
            "minRuntime:\n  pools:\n    a100:\n      reclaimMinRuntim: 1h\n",
            "runway.yaml:4: minRuntime.pools.a100.reclaimMinRuntim: unknown field; did you mean "
            "'reclaimMinRuntime'? (got '1h')",
        ),
        (
            "queues:\n  - name: a\n    parnet: b\n",
            "runway.yaml:3: queues[0].parnet: unknown field; did you mean 'parent'? (got 'b')",
        ),
        ("colour: blue\n", "runway.yaml:1: colour: unknown field (got 'blue')"),
        (
            "server:\n  port: 99999\n",
            "runway.yaml:2: server.port: Input should be less than or equal to 65535 (got 99999)",
        ),
        (
            "auth:\n  mode: tokenreview\n",
            "runway.yaml:2: auth.mode: Input should be 'auto', 'none', 'static' or 'kubernetes' "
            "(got 'tokenreview')",
        ),
        (
            "server:\n  port: 1\n bad: [\n",
            "runway.yaml:3:2: not valid YAML: while parsing a block mapping; expected <block "
            "end>, but found '<block mapping start>'",
        ),
        (
            "server: [1,\n",
            "runway.yaml:2:1: not valid YAML: while parsing a flow node; expected the node "
            "content, but found '<stream end>'",
        ),
        ("- 1\n", "runway.yaml: the top level must be a mapping, got list"),
    ],
)
def test_errors_name_file_line_field_value_and_hint(
    tmp_path: Path, text: str, message: str
) -> None:
    file = tmp_path / "runway.yaml"
    file.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(file)
    assert "<unicode string>" not in str(err.value)
    assert message in str(err.value).replace(str(tmp_path) + "/", "")


def test_errors_come_in_file_order(tmp_path: Path) -> None:
    file = tmp_path / "runway.yaml"
    file.write_text("waitForPodReady: {}\nserver:\n  port: 0\n")
    with pytest.raises(ConfigError) as err:
        load_config(file)
    lines = str(err.value).splitlines()[1:]
    assert [line.split(": ")[0].rsplit(":", 1)[1] for line in lines] == ["1", "3"]


@pytest.mark.parametrize("content", [None, b"\xff\xfe not utf-8"])
def test_unreadable_file_is_its_own_error(tmp_path: Path, content: bytes | None) -> None:
    file = tmp_path / "runway.yaml"
    if content is not None:
        file.write_bytes(content)
    with pytest.raises(ConfigUnreadable, match="cannot read config file"):
        load_config(file)


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        # v1beta1 shape (enable written): the fields as written, unset recovery = off
        ("enable: true\n  timeout: 5m", (True, 300, None)),
        ("enable: false\n  timeout: 5m", (False, 300, None)),
        ("enable: true\n  recoveryTimeout: 0s", (True, 300, 0)),
        # v1beta2 shape (no enable): presence enables, recovery defaults to timeout, 0s = off
        ("timeout: 10m", (True, 600, 600)),
        ("{}", (True, 300, 300)),
        ("timeout: 10m\n  recoveryTimeout: 2m", (True, 600, 120)),
        ("timeout: 10m\n  recoveryTimeout: 0s", (True, 600, None)),
        ("timeout: 10m\n  recoveryTimeout: null", (True, 600, 600)),
        ("null", (False, 300, None)),  # Kueue: a null block is off
    ],
)
def test_wait_for_pods_ready_follows_kueue_v1beta1_and_v1beta2(
    tmp_path: Path, block: str, expected: tuple[bool, float, float | None]
) -> None:
    file = tmp_path / "runway.yaml"
    file.write_text(f"waitForPodsReady:\n  {block}\n")
    w = load_config(file).wait_for_pods_ready
    assert (w.enable, w.timeout, w.recovery_timeout) == expected


def test_code_may_still_build_sections_from_seconds() -> None:
    # Only a file must spell the unit; code and the embedded default hold seconds.
    config = RunwayConfig.model_validate({"waitForPodsReady": {"timeout": 30}})
    assert (config.wait_for_pods_ready.enable, config.wait_for_pods_ready.timeout) == (False, 30)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"server": {"port": 99999}},
            "command line: server.port: Input should be less than or equal to 65535 (got 99999)",
        ),
        ({"server": {"port": 0}}, "command line: server.port: Input should be greater than"),
        (
            {"logging": {"level": "loud"}},
            "command line: logging.level: Input should be 'debug', 'info', 'warning' or 'error' "
            "(got 'loud')",
        ),
        (
            {"server": {"tls": {"keyFile": "k.pem"}}},
            "command line: server.tls: keyFile is set but certFile is not",
        ),
    ],
)
def test_overrides_are_validated_by_the_same_model(
    overrides: dict[str, dict[str, object]], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        with_overrides(RunwayConfig(), overrides)
    assert message in str(err.value)


def test_overrides_keep_the_rest_of_the_file(tmp_path: Path) -> None:
    file = tmp_path / "runway.yaml"
    file.write_text(
        "server:\n  host: 0.0.0.0\n  tls: {certFile: a.crt, keyFile: a.key}\n"
        "auth:\n  staticTokens: [0123456789abcdef0123]\n"
        "waitForPodsReady:\n  timeout: 2m\n"
    )
    config = with_overrides(
        load_config(file), {"server": {"port": 9000, "tls": {"certFile": "b.crt"}}}
    )
    assert (config.server.host, config.server.port) == ("0.0.0.0", 9000)
    assert (config.server.tls.cert_file, config.server.tls.key_file) == ("b.crt", "a.key")
    assert config.auth.static_tokens[0].get_secret_value() == "0123456789abcdef0123"
    assert (config.wait_for_pods_ready.enable, config.wait_for_pods_ready.timeout) == (True, 120)
    assert with_overrides(config, {}) is config
