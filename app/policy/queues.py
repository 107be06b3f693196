"""The queue tree (DESIGN §2): parent lookup, path to the root, lowest common ancestor, and
which namespaces may use a queue (``allows``: names and patterns, or a label selector over the
namespace's labels, handed in as data).

Pure and immutable. A queue name the config does not declare is treated as a top-level queue
with no settings (KAI does the same when a parent is missing); callers that want to warn about
it ask :meth:`QueueTree.is_known`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from types import MappingProxyType
from typing import TYPE_CHECKING

from app.policy.budget import PreemptionBudget
from app.policy.budget import from_config as budget_from_config
from app.policy.selectors import Selector
from app.policy.selectors import from_config as selector_from_config

if TYPE_CHECKING:
    from app.config.queues import QueueConfig, QueueingStrategy


DEFAULT_QUEUE = "default"
"""The queue of a pod that names none (or one its namespace may not use): never a place in
the tree a reclaim resolves from, even when an operator declares a queue of that name."""


@dataclass(frozen=True, slots=True)
class QueueNode:
    """One queue's own settings (``None`` = not set here: inherit)."""

    name: str
    parent: str | None = None
    preempt_min_runtime_s: float | None = None
    reclaim_min_runtime_s: float | None = None
    queueing_strategy: QueueingStrategy = "BestEffortFIFO"
    preemption_budget: PreemptionBudget | None = None
    """``app.policy.budget``; a budget of ``maxPreemptions: 0`` is "none", and stops
    inheritance."""
    origin: str = "file"
    """Where the settings come from: ``file``, or ``Queue/<name>`` (a KAI Queue object)."""
    namespaces: tuple[str, ...] | None = None
    """Names or shell patterns of the namespaces that may use this subtree (None: inherit)."""
    namespace_selector: Selector | None = None
    """The labels of the namespaces that may use this subtree (None: inherit). With
    ``namespaces``: a namespace matching either may."""

    @property
    def restricts_namespaces(self) -> bool:
        """Whether this queue says which namespaces may use its subtree."""
        return self.namespaces is not None or self.namespace_selector is not None


@dataclass(frozen=True)
class QueueTree:
    """A queue tree built from the config (or KAI Queue objects); read-only for its users.

    ``adopt`` is the one change: the tree read from the cluster takes a rebuilt tree's place in
    one synchronous step, so every reader on the event loop sees the old tree or the new one.

    Walks are bounded by the number of queues, so even a tree built by hand with a cycle (the
    config rejects those) cannot loop forever.
    """

    _nodes: Mapping[str, QueueNode] = field(default_factory=lambda: MappingProxyType({}))
    _children: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: MappingProxyType({}), repr=False
    )

    @classmethod
    def from_nodes(cls, nodes: Iterable[QueueNode]) -> QueueTree:
        """Build from queue nodes; raises ``ValueError`` on a duplicate name."""
        by_name: dict[str, QueueNode] = {}
        for node in nodes:
            if node.name in by_name:
                raise ValueError(f"duplicate queue name {node.name!r}")
            # KAI writes "no parent" as "": fold it into None.
            by_name[node.name] = (
                node if node.parent is None or node.parent else replace(node, parent=None)
            )
        children: dict[str, list[str]] = {}
        for node in by_name.values():
            if node.parent is not None:
                children.setdefault(node.parent, []).append(node.name)
        return cls(
            MappingProxyType(by_name),
            MappingProxyType({k: tuple(v) for k, v in children.items()}),
        )

    @classmethod
    def from_config(
        cls, queues: Sequence[QueueConfig], origin: Callable[[str], str] = lambda _name: "file"
    ) -> QueueTree:
        """Build from the config's ``queues`` list (already validated by the config model);
        ``origin`` names where each queue's settings come from."""
        return cls.from_nodes(
            QueueNode(
                name=q.name,
                parent=q.parent_name,
                preempt_min_runtime_s=q.preempt_min_runtime,
                reclaim_min_runtime_s=q.reclaim_min_runtime,
                queueing_strategy=q.queueing_strategy,
                preemption_budget=budget_from_config(q.preemption_budget),
                origin=origin(q.name),
                namespaces=tuple(q.namespaces) if q.namespaces is not None else None,
                namespace_selector=selector_from_config(q.namespace_selector),
            )
            for q in queues
        )

    def adopt(self, other: QueueTree) -> None:
        """Take ``other``'s queues in place (the live tree of KAI Queue objects)."""
        object.__setattr__(self, "_nodes", other._nodes)
        object.__setattr__(self, "_children", other._children)

    def origin_of(self, resolved_from: str) -> str:
        """Where a resolved value comes from: the queue's origin, or ``file`` for the pool
        default (``resolved_from`` = ``default``: the file's ``minRuntime``)."""
        node = self._nodes.get(resolved_from)
        return node.origin if node is not None else "file"

    # -- lookup ---------------------------------------------------------------------------

    def __contains__(self, name: object) -> bool:
        return name in self._nodes

    def __iter__(self) -> Iterator[QueueNode]:
        return iter(self._nodes.values())

    def __len__(self) -> int:
        return len(self._nodes)

    def is_known(self, name: str) -> bool:
        """Whether the config declares ``name``."""
        return name in self._nodes

    def node(self, name: str) -> QueueNode:
        """The queue's settings; an unknown name is a top-level queue with no settings."""
        return self._nodes.get(name) or QueueNode(name)

    def parent(self, name: str) -> str | None:
        """The parent's name, or None for a top-level (or unknown) queue."""
        node = self._nodes.get(name)
        return node.parent if node is not None and node.parent in self._nodes else None

    def children(self, name: str) -> tuple[str, ...]:
        """Direct children, in config order."""
        return self._children.get(name, ())

    def allows(self, queue: str, namespace: str, labels: Mapping[str, str] | None) -> bool:
        """Whether pods of ``namespace`` (whose labels are ``labels``; None: not readable, no
        selector matches) may use ``queue``: the nearest queue up the tree that sets
        ``namespaces`` or ``namespaceSelector`` decides, and a match of either allows; none set
        (or a queue the tree does not know) = every namespace."""
        node = self.namespace_rule_of(queue)
        if node is None:
            return True
        names, selector = node.namespaces, node.namespace_selector
        if names is not None and any(fnmatchcase(namespace, p) for p in names):
            return True
        return selector is not None and selector.matches(labels)

    def namespace_rule_of(self, queue: str) -> QueueNode | None:
        """The queue whose ``namespaces``/``namespaceSelector`` govern ``queue``: itself, else
        the nearest ancestor that sets either (None: no restriction)."""
        name: str | None = queue
        for _ in range(len(self._nodes) + 1):
            node = self._nodes.get(name) if name is not None else None
            if node is None:
                return None
            if node.restricts_namespaces:
                return node
            name = node.parent
        return None

    def uses_selectors(self) -> bool:
        """Whether some queue has a ``namespaceSelector`` (namespace labels then matter)."""
        return any(n.namespace_selector is not None for n in self._nodes.values())

    def roots(self) -> tuple[str, ...]:
        """Top-level queues, in config order."""
        return tuple(n.name for n in self._nodes.values() if self.parent(n.name) is None)

    def is_leaf(self, name: str) -> bool:
        """True when no queue names ``name`` as its parent."""
        return not self._children.get(name)

    # -- paths ----------------------------------------------------------------------------

    def path_to_root(self, name: str) -> tuple[str, ...]:
        """``name`` first, then its parent, ... up to its top-level queue."""
        path = [name]
        for _ in range(len(self._nodes)):
            parent = self.parent(path[-1])
            if parent is None or parent in path:
                break
            path.append(parent)
        return tuple(path)

    def hierarchy_path(self, name: str) -> tuple[str, ...]:
        """Top-level queue first, down to ``name`` (KAI's ``getQueueHierarchyPath``)."""
        return self.path_to_root(name)[::-1]

    def top_level(self, name: str) -> str:
        """The top-level queue above ``name`` (``name`` itself when it is top-level)."""
        return self.path_to_root(name)[-1]

    def lowest_common_ancestor(self, a: str, b: str) -> str | None:
        """The deepest queue that is ``a`` or an ancestor of it and ``b`` or an ancestor of it.

        None when the two are in different top-level trees.
        """
        above_b = set(self.path_to_root(b))
        for q in self.path_to_root(a):
            if q in above_b:
                return q
        return None
