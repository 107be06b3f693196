"""Render helm/runway with Helm's own Go code (helm-python-sdk, no helm binary) for the tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml
from helm_python import _native

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "helm" / "runway"
ALL_OPTIONS = ROOT / "tests" / "unit" / "data" / "helm-all-options.yaml"
RELEASE = "rw"
NAMESPACE = "runway-system"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys: the API server's strict decoding does too."""


def _mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def all_options() -> dict[str, Any]:
    """The all-options values file."""
    data: dict[str, Any] = yaml.safe_load(ALL_OPTIONS.read_text(encoding="utf-8"))
    return data


def render_files(
    values: dict[str, Any] | None = None,
    *,
    namespace: str = NAMESPACE,
    kube_version: str | None = None,
    api_versions: Sequence[str] | None = None,
    release: str = RELEASE,
) -> dict[str, str]:
    """Template path → rendered text, as ``helm template`` (optionally ``--kube-version`` and
    ``--api-versions``, which only the native call takes: ``Chart.render`` does not expose them).
    """
    with helm.Chart.load(CHART) as chart:
        if kube_version is None and api_versions is None:
            return chart.render(values, name=release, namespace=namespace)
        opts: dict[str, Any] = {"name": release, "namespace": namespace}
        if kube_version is not None:
            opts["kube_version"] = kube_version
        if api_versions is not None:
            opts["api_versions"] = list(api_versions)
        raw = _native.call_string(
            "helm_render",
            chart._raw(),
            None if values is None else json.dumps(values),
            json.dumps(opts),
        )
        files: dict[str, str] = json.loads(raw)
        return files


def parse_manifests(files: dict[str, str]) -> list[dict[str, Any]]:
    """Every object of a render (NOTES.txt and empty documents left out), in file order."""
    objects: list[dict[str, Any]] = []
    for path in sorted(files):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.load_all(files[path], Loader=_StrictLoader):
            if doc:
                objects.append(doc)
    return objects


def render(
    values: dict[str, Any] | None = None,
    *,
    namespace: str = NAMESPACE,
    kube_version: str | None = None,
    api_versions: Sequence[str] | None = None,
    release: str = RELEASE,
) -> list[dict[str, Any]]:
    """The chart's objects for ``values`` (release ``release``)."""
    return parse_manifests(
        render_files(
            values,
            namespace=namespace,
            kube_version=kube_version,
            api_versions=api_versions,
            release=release,
        )
    )


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    """Objects of ``kind`` (and ``name``, when given)."""
    return [
        o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The single object of ``kind`` (and ``name``); fails the test otherwise."""
    found = find(objects, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
    return found[0]


def notes_stanza(notes: str) -> dict[str, Any]:
    """The KubeSchedulerConfiguration stanza NOTES prints for the cluster's own scheduler: from
    the line ``extenders:`` to the first blank line, parsed as YAML."""
    lines = notes.splitlines()
    start = lines.index("extenders:")
    end = lines.index("", start)
    stanza: dict[str, Any] = yaml.safe_load("\n".join(lines[start:end]))
    return stanza
