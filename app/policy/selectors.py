"""THE label-selector match (Kubernetes' ``labels.Selector``), over a plain labels mapping.

A queue's ``namespaceSelector`` (DESIGN §2.1) is matched against its namespace's labels: every
requirement must hold; ``In`` needs the key with one of the values, ``NotIn`` holds when the key
is absent or its value is none of them, ``Exists``/``DoesNotExist`` look at the key alone. No
requirement (``{}``) matches every set of labels, as in Kubernetes.

``None`` instead of labels means "not readable" (a namespace carrying more than ``MAX_LABELS``
labels, ``app.state.cache``): no selector matches it, not even ``{}`` — refusing is the safe side
of a value runway will not hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.config.selectors import LabelSelectorConfig

MAX_LABELS = 256
"""The most labels runway keeps of one namespace; one with more matches no selector."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """``key operator values``: one requirement of a selector."""

    key: str
    operator: str
    """``In``, ``NotIn``, ``Exists`` or ``DoesNotExist`` (validated by the config)."""
    values: frozenset[str] = frozenset()

    def holds(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` meet this requirement."""
        value = labels.get(self.key)
        op = self.operator
        if op == "In":
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        return False  # an operator the config would refuse: never matches


@dataclass(frozen=True, slots=True)
class Selector:
    """A label selector: its requirements, all of which must hold."""

    requirements: tuple[Requirement, ...] = ()
    text: str = ""
    """The ``kubectl -l`` form, for people (empty for ``{}``)."""

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """``matches(self, labels)``."""
        return matches(self, labels)


EVERYTHING = Selector()
"""``{}``: matches every readable set of labels."""


def matches(selector: Selector, labels: Mapping[str, str] | None) -> bool:
    """Whether ``labels`` satisfy every requirement of ``selector``; ``None`` (labels runway
    could not read) matches nothing."""
    if labels is None:
        return False
    return all(r.holds(labels) for r in selector.requirements)


def from_config(section: LabelSelectorConfig | None) -> Selector | None:
    """The config's ``LabelSelector`` (``matchLabels`` and ``matchExpressions``) as a
    ``Selector``; None stays None (unset: inherit)."""
    if section is None:
        return None
    return Selector(
        tuple(Requirement(r.key, r.operator, frozenset(r.values)) for r in section.requirements()),
        str(section),
    )
