"""Kubernetes resource quantities ("500m", "2", "1Gi", "1e3") as integers, and a pod's requests.

The grammar is apimachinery's ``resource.Quantity``: an optionally signed decimal number followed
by a binary suffix (Ki..Ei), a decimal SI suffix (n, u, m, "", k, M..E) or a decimal exponent
(``e3``, ``E-2``). Values are exact (``Fraction``) and rounded **up** to an integer the way
kube-scheduler counts them: CPU in millicores (``MilliValue``), everything else in units
(``Value``: bytes for memory and storage, devices for extended resources).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction

from app.model import Container, Pod

Resources = dict[str, int]
"""Resource name → integer amount (``cpu`` in millicores, the rest in units)."""

CPU = "cpu"

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
# The exponent alternative comes before the bare ``E`` (exa) so "1E3" is 1000 and "1E" is 10^18.
_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE]?)"
)
# Far beyond any real request; bounds the work an absurd exponent in a payload can cause.
_MAX_EXPONENT = 1000


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity; the message names the value."""


def parse_quantity(text: str) -> Fraction:
    """The exact value of a quantity string (``"1.5Gi"`` → 1610612736).

    Raises ``QuantityError`` naming the value when it is not a valid quantity.
    """
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise QuantityError(
            f"invalid quantity {text!r}: expected a number with an optional suffix "
            "(m, k, M, G, Ki, Mi, Gi, ... or an exponent like e3), e.g. '500m', '2', '1Gi'"
        )
    number = Fraction(match["number"] + ("0" if match["number"].endswith(".") else ""))
    suffix = match["suffix"]
    if suffix in _BINARY:
        scale = Fraction(_BINARY[suffix])
    elif suffix in _DECIMAL:
        scale = _DECIMAL[suffix]
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(f"invalid quantity {text!r}: exponent {exponent} is out of range")
        scale = Fraction(10) ** exponent
    value = number * scale
    return -value if match["sign"] == "-" else value


def quantity_value(text: str) -> int:
    """The quantity rounded up to a whole unit (apimachinery ``Value``): ``"100m"`` → 1."""
    return math.ceil(parse_quantity(text))


def quantity_milli(text: str) -> int:
    """The quantity in thousandths, rounded up (apimachinery ``MilliValue``): ``"0.5"`` → 500."""
    return math.ceil(parse_quantity(text) * 1000)


@functools.lru_cache(maxsize=4096)
def resource_amount(name: str, text: str) -> int:
    """The integer amount of resource ``name``: millicores for ``cpu``, whole units otherwise."""
    return quantity_milli(text) if name == CPU else quantity_value(text)


def parse_resources(quantities: Mapping[str, str] | None) -> Resources:
    """A ``requests``-style map of quantity strings as integers (see ``resource_amount``)."""
    if not quantities:
        return {}
    return {name: resource_amount(name, text) for name, text in quantities.items()}


def add_resources(*parts: Mapping[str, int]) -> Resources:
    """The per-resource sum of ``parts``."""
    total: Resources = {}
    for part in parts:
        for name, amount in part.items():
            total[name] = total.get(name, 0) + amount
    return total


def max_resources(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    """The per-resource maximum of ``a`` and ``b``."""
    out = dict(a)
    for name, amount in b.items():
        out[name] = max(out.get(name, 0), amount)
    return out


def covers(freed: Mapping[str, int], needed: Mapping[str, int]) -> bool:
    """True when ``freed`` has at least the amount of every resource in ``needed``."""
    return all(freed.get(name, 0) >= amount for name, amount in needed.items())


def _container_requests(containers: Iterable[Container]) -> Iterable[Resources]:
    for container in containers:
        resources = container.resources
        yield parse_resources(resources.requests if resources is not None else None)


def pod_requests(pod: Pod) -> Resources:
    """What the pod asks the scheduler for, as kube-scheduler computes it.

    The sum of its containers' requests; each init container runs alone before them, so the
    pod needs at least the largest of those (per resource); plus ``spec.overhead`` (the runtime
    class's cost). Raises ``QuantityError`` on an invalid quantity (the API server rejects those,
    so this only happens with hand-made payloads).
    """
    spec = pod.spec
    total = add_resources(*_container_requests(spec.containers or ()))
    for init in _container_requests(spec.initContainers or ()):
        total = max_resources(total, init)
    total = add_resources(total, parse_resources(spec.overhead))
    return {name: amount for name, amount in total.items() if amount}


def format_resources(resources: Mapping[str, int]) -> str:
    """``cpu=1500m, memory=1073741824`` — for reasons an operator reads."""
    parts = []
    for name in sorted(resources):
        amount = resources[name]
        parts.append(f"{name}={amount}m" if name == CPU else f"{name}={amount}")
    return ", ".join(parts) if parts else "nothing"
