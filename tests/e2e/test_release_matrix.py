"""The release matrix's own rules (tests/e2e/conftest.py): which release a ``releases`` marker
spec selects, and which KubeSchedulerConfiguration API each release reads. No plane needed."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import V1, V1BETA1, config_api, release_matches, resolve_release


@pytest.mark.parametrize(
    ("release", "spec", "expected"),
    [
        ("1.20.2", "1.20", True),
        ("1.20.2", "==1.20.2", True),
        ("1.20.2", "1.34", False),
        ("1.34.4", ">=1.25", True),
        ("1.25.0", ">=1.25", True),
        ("1.24.9", ">=1.25", False),
        ("1.31.9", "<1.32", True),
        ("1.32.0", "<1.32", False),
        ("1.34.4", "<=1.34", True),
        ("1.35.4", "<=1.34", False),
        ("1.25.1", ">1.24", True),
        ("1.24.3", ">1.24", False),
        ("1.37.2", "v1.37", True),
    ],
)
def test_a_releases_spec_selects(release: str, spec: str, expected: bool) -> None:
    assert release_matches(release, spec) is expected


def test_an_unreadable_spec_names_itself() -> None:
    with pytest.raises(ValueError, match=r"'~1\.20'"):
        release_matches("1.20.2", "~1.20")


@pytest.mark.parametrize(
    ("release", "api"),
    [("1.20.2", V1BETA1), ("1.24.9", V1BETA1), ("1.25.0", V1), ("1.37.2", V1)],
)
def test_the_scheduler_config_api_of_a_release(release: str, api: str) -> None:
    assert config_api(release) == api


def test_a_minor_resolves_to_the_patch_tools_kube_builds() -> None:
    assert resolve_release("1.34") == "1.34.4"
    assert resolve_release("v1.37") == "1.37.2"
    assert resolve_release("1.36.1") == "1.36.1"
    with pytest.raises(ValueError, match=r"unknown release '1\.99'"):
        resolve_release("1.99")
