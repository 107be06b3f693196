"""Kubernetes label selectors in the config: the ``LabelSelector`` object (a queue's
``namespaceSelector``) and the string form (``team=a,tier in (gold,silver),!legacy``, what a KAI
Queue's ``runway.dev/namespace-selector`` annotation holds), both validated strictly.

The object is Kubernetes' ``metav1.LabelSelector``: ``matchLabels`` (key → value) and
``matchExpressions`` (``{key, operator, values}``, operators ``In``, ``NotIn``, ``Exists``,
``DoesNotExist``), all ANDed; ``{}`` matches every set of labels. Keys and values are checked as
the API server checks labels (a qualified name; a value of at most 63 characters), so a selector
that could never match a real label is an error here rather than a queue nobody can use.

The string form is ``kubectl -l``'s (``labels.Parse``): requirements separated by commas, each
``key``, ``!key``, ``key=value`` (``==``), ``key!=value``, ``key in (v1,v2)`` or
``key notin (v1,v2)``. ``>``/``<`` (node selectors only) and an empty string are refused. What
the policy matches is ``app.policy.selectors``.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from app.config.section import Section

Operator = Literal["In", "NotIn", "Exists", "DoesNotExist"]

_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
MAX_SHOWN = 80
"""Characters of an offending value quoted in an error message."""


def _shown(value: str) -> str:
    return repr(value if len(value) <= MAX_SHOWN else value[:MAX_SHOWN] + "...")


def label_key_problem(key: str) -> str | None:
    """What is wrong with ``key`` as a label key (None: a valid ``[prefix/]name``)."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return f"label key {_shown(key)} has an empty prefix before '/'"
    if slash and (len(prefix) > 253 or not _PREFIX.fullmatch(prefix)):
        return (
            f"label key {_shown(key)}: the prefix must be a DNS subdomain (lowercase letters, "
            "digits, '-' and '.', at most 253 characters)"
        )
    if not name or len(name) > 63 or not _NAME.fullmatch(name):
        return (
            f"label key {_shown(key)}: the name must be 1-63 characters of letters, digits, "
            "'-', '_' and '.', starting and ending with a letter or digit"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """What is wrong with ``value`` as a label value (None: valid; empty is valid)."""
    if value and (len(value) > 63 or not _NAME.fullmatch(value)):
        return (
            f"label value {_shown(value)}: at most 63 characters of letters, digits, '-', '_' "
            "and '.', starting and ending with a letter or digit (or empty)"
        )
    return None


def _check_key(key: str) -> str:
    problem = label_key_problem(key)
    if problem is not None:
        raise ValueError(problem)
    return key


class LabelSelectorRequirement(Section):
    """One of ``matchExpressions``: Kubernetes' ``LabelSelectorRequirement``."""

    key: str = Field(description="The label key the requirement applies to.")
    operator: Operator = Field(
        description="`In` / `NotIn`: the label's value is (not) one of `values` (a namespace "
        "without the label is `NotIn` anything); `Exists` / `DoesNotExist`: the label is "
        "(not) set, `values` must be empty."
    )
    values: list[str] = Field(
        default_factory=list,
        description="The values for `In` and `NotIn` (at least one); empty for `Exists` and "
        "`DoesNotExist`.",
    )

    @field_validator("key")
    @classmethod
    def _label_key(cls, key: str) -> str:
        return _check_key(key)

    @field_validator("values")
    @classmethod
    def _label_values(cls, values: list[str]) -> list[str]:
        for value in values:
            problem = label_value_problem(value)
            if problem is not None:
                raise ValueError(problem)
        return values

    @model_validator(mode="after")
    def _values_fit_the_operator(self) -> LabelSelectorRequirement:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(
                f"operator {self.operator!r} (key {_shown(self.key)}) needs at least one value"
            )
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(
                f"operator {self.operator!r} (key {_shown(self.key)}) takes no values, got "
                f"{self.values!r}"
            )
        return self

    def __str__(self) -> str:
        values = ",".join(sorted(set(self.values)))
        if self.operator in ("In", "NotIn") and len(set(self.values)) == 1:
            return f"{self.key}{'=' if self.operator == 'In' else '!='}{values}"
        return {
            "In": f"{self.key} in ({values})",
            "NotIn": f"{self.key} notin ({values})",
            "Exists": self.key,
            "DoesNotExist": f"!{self.key}",
        }[self.operator]


class LabelSelectorConfig(Section):
    """Kubernetes' ``LabelSelector``: every requirement must hold; ``{}`` matches everything."""

    match_labels: dict[str, str] = Field(
        default_factory=dict,
        description="`key: value` pairs, each the same as an `In` requirement with that one value.",
    )
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list,
        description="Requirements `{key, operator, values}`; operators `In`, `NotIn`, "
        "`Exists`, `DoesNotExist`.",
    )

    @field_validator("match_labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        for key, value in labels.items():
            problem = label_key_problem(key) or label_value_problem(value)
            if problem is not None:
                raise ValueError(problem)
        return labels

    def requirements(self) -> list[LabelSelectorRequirement]:
        """Every requirement: ``matchLabels`` as ``In`` first, then ``matchExpressions``."""
        return [
            *(
                LabelSelectorRequirement(key=k, operator="In", values=[v])
                for k, v in self.match_labels.items()
            ),
            *self.match_expressions,
        ]

    def __str__(self) -> str:
        """The string form (``kubectl -l``); empty for ``{}``."""
        return ",".join(str(r) for r in self.requirements())


# -- the string form ------------------------------------------------------------------------

_TOKEN = re.compile(r"!=|==|=|!|\(|\)|,|<|>|[^\s!=(),<>]+")
"""kubectl's lexer: the symbols, else a run of other non-blank characters (a key, a value, or
the words ``in``/``notin``). Every non-blank character is in some token."""
_SYMBOLS = frozenset(("!=", "==", "=", "!", "(", ")", ",", "<", ">"))


def _tokens(text: str) -> list[tuple[str, int]]:
    """``(token, column)`` pairs; columns count from 1."""
    return [(m.group(), m.start() + 1) for m in _TOKEN.finditer(text)]


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0
        self.end = len(text) + 1

    def peek(self) -> tuple[str, int] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> tuple[str, int]:
        token = self.peek()
        if token is None:
            raise ValueError(f"unexpected end of selector at column {self.end}")
        self.at += 1
        return token

    def identifier(self, what: str) -> str:
        token, column = self.take()
        if token in _SYMBOLS:
            raise ValueError(f"expected {what} at column {column}, found {token!r}")
        return token

    def requirement(self) -> LabelSelectorRequirement:
        token, column = self.take()
        if token == "!":
            key = self.identifier("a label key after '!'")
            return LabelSelectorRequirement(key=_check_key(key), operator="DoesNotExist")
        if token in _SYMBOLS:
            raise ValueError(f"expected a label key at column {column}, found {token!r}")
        key = _check_key(token)
        following = self.peek()
        if following is None or following[0] == ",":
            return LabelSelectorRequirement(key=key, operator="Exists")
        op, at = self.take()
        if op in ("=", "==", "!="):
            value = self.exact_value()
            operator: Operator = "NotIn" if op == "!=" else "In"
            return LabelSelectorRequirement(key=key, operator=operator, values=[value])
        if op in ("in", "notin"):
            return LabelSelectorRequirement(
                key=key, operator="In" if op == "in" else "NotIn", values=self.value_set(op)
            )
        if op in ("<", ">"):
            raise ValueError(
                f"operator {op!r} at column {at} is for node selectors, not label selectors"
            )
        raise ValueError(
            f"expected an operator (=, ==, !=, in, notin) after key {_shown(key)} at column "
            f"{at}, found {_shown(op)}"
        )

    def exact_value(self) -> str:
        following = self.peek()
        if following is None or following[0] == ",":
            return ""  # ``key=``: the empty value, as Kubernetes reads it
        token, column = self.take()
        if token in _SYMBOLS:
            raise ValueError(f"expected a value at column {column}, found {token!r}")
        return _checked_value(token)

    def value_set(self, op: str) -> list[str]:
        token, column = self.take()
        if token != "(":
            raise ValueError(f"expected '(' after {op!r} at column {column}, found {token!r}")
        values: list[str] = []
        while True:
            token, column = self.take()
            if token == ")" and not values:
                raise ValueError(f"{op!r} needs at least one value (column {column})")
            if token in _SYMBOLS:
                raise ValueError(f"expected a value at column {column}, found {token!r}")
            values.append(_checked_value(token))
            token, column = self.take()
            if token == ")":
                return values
            if token != ",":
                raise ValueError(f"expected ',' or ')' at column {column}, found {token!r}")

    def selector(self) -> LabelSelectorConfig:
        if not self.tokens:
            raise ValueError(
                "empty selector (it would match every namespace): give at least one requirement"
            )
        found = [self.requirement()]
        while (token := self.peek()) is not None:
            if token[0] != ",":
                raise ValueError(f"expected ',' at column {token[1]}, found {_shown(token[0])}")
            self.take()
            found.append(self.requirement())
        return LabelSelectorConfig(match_expressions=found)


def _checked_value(value: str) -> str:
    problem = label_value_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def parse_selector(text: str) -> LabelSelectorConfig:
    """``text`` in ``kubectl -l``'s syntax as a ``LabelSelectorConfig`` (every requirement in
    ``matchExpressions``); ``ValueError`` says what is wrong and where (column, from 1)."""
    return _Parser(text).selector()
