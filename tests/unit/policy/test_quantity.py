"""Kubernetes quantity strings → integers, and a pod's requests as kube-scheduler counts them."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.model import Container, Pod, PodSpec, ResourceRequirements
from app.policy.quantity import (
    QuantityError,
    covers,
    format_resources,
    parse_quantity,
    pod_requests,
    quantity_milli,
    quantity_value,
    resource_amount,
)


@pytest.mark.parametrize(
    ("text", "exact"),
    [
        ("500m", Fraction(1, 2)),
        ("2", Fraction(2)),
        ("1Gi", Fraction(2**30)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1E", Fraction(10**18)),  # bare E is exa, not an exponent
        ("128974848", Fraction(128974848)),
        ("129e6", Fraction(129_000_000)),
        ("129M", Fraction(129_000_000)),
        ("123Mi", Fraction(128974848)),
        ("0.5", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("1.", Fraction(1)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("+2k", Fraction(2000)),
        ("-1", Fraction(-1)),
        ("5n", Fraction(5, 10**9)),
        ("3u", Fraction(3, 10**6)),
        ("2e-3", Fraction(2, 1000)),
        ("1Ki", Fraction(1024)),
        ("1Ti", Fraction(2**40)),
        ("1Pi", Fraction(2**50)),
        ("1Ei", Fraction(2**60)),
        ("1T", Fraction(10**12)),
        ("1P", Fraction(10**15)),
        ("0", Fraction(0)),
    ],
)
def test_parse_quantity(text: str, exact: Fraction) -> None:
    assert parse_quantity(text) == exact


@pytest.mark.parametrize(
    ("text", "value", "milli"),
    [
        ("500m", 1, 500),  # Value rounds up, as apimachinery does
        ("100m", 1, 100),
        ("2", 2, 2000),
        ("0.5", 1, 500),
        ("1Gi", 2**30, 2**30 * 1000),
        ("1n", 1, 1),
        ("0", 0, 0),
        ("2500m", 3, 2500),
    ],
)
def test_value_and_milli_round_up(text: str, value: int, milli: int) -> None:
    assert quantity_value(text) == value
    assert quantity_milli(text) == milli


def test_cpu_is_counted_in_millicores_everything_else_in_units() -> None:
    assert resource_amount("cpu", "1") == 1000
    assert resource_amount("memory", "1Ki") == 1024
    assert resource_amount("nvidia.com/gpu", "2") == 2
    assert resource_amount("memory", "100m") == 1


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "e3",
        "1e",
        "1KI",
        "1 Gi",
        ".",
        "1.5.5",
        "m",
        "1ee3",
        "--1",
        "1Gib",
        "0x10",
        "1e99999",
        "\u0661",  # a non-ASCII digit
    ],
)
def test_invalid_quantities_name_the_value(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert repr(text) in str(info.value)


@given(st.integers(min_value=0, max_value=10**12))
def test_plain_integers_round_trip(n: int) -> None:
    assert quantity_value(str(n)) == n
    assert quantity_milli(f"{n}m") == n


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["Ki", "Mi", "Gi", "Ti"]))
def test_binary_suffixes(n: int, suffix: str) -> None:
    power = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40}[suffix]
    assert quantity_value(f"{n}{suffix}") == n * 2**power


def _container(**requests: str) -> Container:
    return Container(name="c", resources=ResourceRequirements(requests=dict(requests)))


def test_pod_requests_sum_containers_max_init_plus_overhead() -> None:
    pod = Pod(
        spec=PodSpec(
            containers=[
                _container(cpu="500m", memory="1Gi"),
                _container(cpu="250m", **{"nvidia.com/gpu": "1"}),
                Container(name="no-resources"),
            ],
            initContainers=[_container(cpu="2", memory="100Mi"), _container(memory="2Gi")],
            overhead={"cpu": "100m", "memory": "10Mi"},
        )
    )
    assert pod_requests(pod) == {
        "cpu": 2000 + 100,  # the 2-CPU init container exceeds the 750m sum
        "memory": 2 * 2**30 + 10 * 2**20,  # the 2Gi init container exceeds 1Gi
        "nvidia.com/gpu": 1,
    }


def test_pod_without_requests_requests_nothing() -> None:
    assert pod_requests(Pod()) == {}
    assert pod_requests(Pod(spec=PodSpec(containers=[_container(cpu="0")]))) == {}


def test_pod_requests_raise_on_invalid_quantity() -> None:
    pod = Pod(spec=PodSpec(containers=[_container(cpu="lots")]))
    with pytest.raises(QuantityError, match="'lots'"):
        pod_requests(pod)


def test_covers_and_format() -> None:
    assert covers({"cpu": 1000, "memory": 5}, {"cpu": 1000})
    assert not covers({"cpu": 999}, {"cpu": 1000})
    assert not covers({}, {"memory": 1})
    assert covers({}, {})
    assert format_resources({"memory": 1024, "cpu": 1500}) == "cpu=1500m, memory=1024"
    assert format_resources({}) == "nothing"
