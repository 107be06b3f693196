"""The documents name things that exist: every backticked name in the READMEs (the repository's,
tests/, tests/data/, bench/) and docs/*.md that looks like a module, class, function, file, test,
config key, chart value, record field, metric, REST path, CLI command or runway label resolves
to something in this repository; every `DESIGN §N` cited anywhere is a heading of
docs/DESIGN.md; and docs/ARCHITECTURE.md's map lists exactly the modules of app/, each where it
is.

How a span is read (``unresolved``): by its shape first — a path, a test, a metric, a REST path,
a command line, a runway.dev name — and a dotted or slashed name then by every reading it could
have (a module of app/ and its attributes; a key of the config file, of the chart's values or of
the WorkloadRecord; a field of a REST answer or of an API object runway decodes; ``Class.member``
of a class in app/). Bare identifiers are checked when they cannot be plain words: snake_case
with an underscore, and CamelCase with two humps — each must be defined in app/ or spelled by it
(a string it writes or reads) or by the chart. Upstream names (Kubernetes', Kueue's, KAI's) that
runway does not spell are listed in ``ELSEWHERE`` with a reason each; prose in backticks (a log
line, a sample value, a command with placeholders) matches no shape and is not read, nor is a
span broken across two lines.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import importlib
import importlib.util
import inspect
import json
import os
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"
DOCS = [
    ROOT / "README.md",
    ROOT / "tests" / "README.md",
    ROOT / "tests" / "data" / "README.md",
    ROOT / "bench" / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
]

# Names the documents cite on purpose that nothing here defines or spells, each with its reason
# (a test fails when an entry is no longer cited, or resolves without the list): mostly other
# projects' names, whose behaviour runway follows or departs from.
ELSEWHERE: dict[str, str] = {
    # kube-scheduler 1.20's Go source and configuration
    "PriorityQueue.Update": "kube-scheduler's scheduling queue (DESIGN §4.6)",
    "GetQueueOrderTimestamp": "Kueue's queue-order timestamp function (DESIGN §5.2)",
    "HTTPExtender.IsInterested": "kube-scheduler's extender client",
    "PodEligibleToPreemptOthers": "kube-scheduler's default preemption",
    "ExtenderTLSConfig": "kube-scheduler's extender stanza",
    "PostFilter": "a kube-scheduler extension point (DESIGN §4.5)",
    "PreEnqueue": "a kube-scheduler extension point (DESIGN §4.4)",
    "tlsConfig.caFile": "the extender stanza of KubeSchedulerConfiguration",
    "tlsConfig.certFile": "the extender stanza of KubeSchedulerConfiguration",
    "tlsConfig.serverName": "the extender stanza of KubeSchedulerConfiguration",
    "tlsConfig.cert": "the extender stanza of KubeSchedulerConfiguration",
    "clientConnection.kubeconfig": "KubeSchedulerConfiguration's client connection",
    "ClusterConfiguration": "kubeadm's configuration kind (docs/deploy.md)",
    "scheduler.extraVolumes": "kubeadm's ClusterConfiguration (README, installing by hand)",
    "PriorityClass": "a Kubernetes kind (the chart names one, system-cluster-critical)",
    "authorization.credentials": "a Prometheus ServiceMonitor field",
    "scheduling_algorithm": "a kube-scheduler metric (bench/README.md)",
    "e2e_scheduling": "a kube-scheduler metric (bench/README.md)",
    "build.sh": "the Go peer's build script, outside the repository with the cluster tools",
    # Kubernetes API machinery, Python's and Starlette's
    "metav1.LabelSelector": "apimachinery's selector type (DESIGN §2.1)",
    "LabelSelectorAsSelector": "apimachinery's selector conversion (DESIGN §11)",
    'labels.Parse("")': "apimachinery's selector parser (DESIGN §9)",
    "app.state.auth": "Starlette's state of the FastAPI app (server.create_app sets it)",
    "V1Pod": "the official Python client's generated model (DESIGN §10.1: why not it)",
    "runway.dev/workloads": "the group/resource a SubjectAccessReview asks (auth.sar.*)",
    "my-values.yaml": "a user's own values file",
    # Kueue and KAI-Scheduler
    "ReclaimablePods": "Kueue's Workload status (DESIGN §2.2)",
    "PodSets": "Kueue's Workload spec (DESIGN §11)",
    "PodGroup": "KAI-Scheduler's gang object (DESIGN §2.3, §8)",
    "spec.parentQueue": "KAI-Scheduler's Queue spec",
    "spec.preemptMinRuntime": "KAI-Scheduler's Queue spec",
    "spec.reclaimMinRuntime": "KAI-Scheduler's Queue spec",
    # Kubernetes API groups in prose
    "policy/v1": "the PodDisruptionBudget API group",
    "policy/v1beta1": "the PodDisruptionBudget API group",
}

APP_TOP = sorted(
    p.stem if p.is_file() else p.name
    for p in APP.iterdir()
    if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()
)
PACKAGES = [p.name for p in APP.iterdir() if (p / "__init__.py").is_file()]

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
SPAN = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(
    r"^(?:app[./])?[A-Za-z_][\w-]*(?:\[\])?(?:[./](?:<key>|[\w*]+)(?:\[\])?)+(?:\(.*\))?$"
)
SNAKE = re.compile(r"^_?[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?:\(\))?$")
CAMEL = re.compile(r"^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$")
TEST_FILE = re.compile(r"^(?:tests/)?(?:unit|integration|e2e|hostile|contract)/[\w/]+\.py")
TEST_NAME = re.compile(r"^(?:::)?(test_\w+)$")
METRIC = re.compile(r"^(?:runway|process|python)_[\w*]+(?:\{.*\})?$")
REST = re.compile(r"^(?:(GET|POST|PUT|PATCH|DELETE) )?(/(?:v1|healthz|readyz|metrics)\S*)$")
BENCH = re.compile(r"^bench\.(\w+)(?: --.*)?$")  # bench.extender --parts http
COMMAND = re.compile(r"^python -m (app|bench\.\w+)\b(.*)$")
RUNWAY_NAME = re.compile(r"^runway\.dev/[\w.*-]+")
ROOT_PATH = re.compile(
    r"^(?:\.ci|app|bench|docker|docs|helm|openapi|requirements|tests)/\S*$"
    r"|^(?:pyproject\.toml|Dockerfile|README\.md)$"
)
FILE_NAME = re.compile(r"^[\w.-]+\.(?:py|json|yaml|yml|md|txt|sh|crt|key|toml)$")
RESOURCE = re.compile(r"^[a-z]+\.(?:batch|[a-z0-9.-]+\.(?:io|dev|ai))$")
TEMPLATE = re.compile(r"\b[A-Z]{2,}\b|^v\d")  # RELEASE-runway.NAMESPACE.svc, v1.30.0
NON_OPENAPI_PATHS = {"/ui/", "/docs", "/openapi.json"}
SCOPE = {  # where each document's code names live (app/ unless said here)
    ROOT / "tests" / "README.md": ("app", "tests"),
    ROOT / "tests" / "data" / "README.md": ("app", "tests"),
    ROOT / "bench" / "README.md": ("app", "bench"),
}


def spans(path: Path) -> Iterator[tuple[int, str]]:
    """(line, span) for every inline code span outside fenced blocks."""
    text = path.read_text(encoding="utf-8")
    for fence in FENCE.finditer(text):  # blank fences out, keeping the line numbers
        text = text.replace(fence.group(0), "\n" * fence.group(0).count("\n"), 1)
    for number, line in enumerate(text.splitlines(), 1):
        for span in SPAN.findall(line):
            yield number, span.strip()


# -- what exists ---------------------------------------------------------------------------


@functools.cache
def code_index(folder: str) -> tuple[frozenset[str], frozenset[str], dict[str, list[str]]]:
    """What the Python code under ``folder`` (app, tests) has, in one pass over its syntax
    trees: the names it defines (classes, functions, assigned names and attributes); the words
    of every string it spells, docstrings aside; class name → the modules defining it."""
    defined: set[str] = set()
    spelled: set[str] = set()
    classes: dict[str, list[str]] = {}
    scopes = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    for path in (ROOT / folder).rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        docstrings: set[int] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, scopes):  # walked before its body: its docstring is known
                first = node.body[0] if node.body else None
                if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                    docstrings.add(id(first.value))
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, []).append(module)
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                defined.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                defined.add(node.attr)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
            ):
                spelled.update(re.findall(r"[\w./*-]+", node.value))
                spelled.add(node.value)
    return frozenset(defined), frozenset(spelled), classes


@functools.cache
def vocabulary(folders: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """(names the code under ``folders`` defines, words it spells)."""
    indexes = [code_index(folder) for folder in folders]
    return frozenset().union(*(i[0] for i in indexes)), frozenset().union(*(i[1] for i in indexes))


@functools.cache
def chart_words() -> frozenset[str]:
    """The words of the Helm chart (templates, values, CRD, dashboards)."""
    text = " ".join(p.read_text(encoding="utf-8") for p in (ROOT / "helm").rglob("*.*"))
    return frozenset(re.findall(r"[\w./-]+", text))


@functools.cache
def classes_named(folders: tuple[str, ...]) -> dict[str, list[str]]:
    """class name → the modules under ``folders`` that define it."""
    out: dict[str, list[str]] = {}
    for folder in folders:
        for name, modules in code_index(folder)[2].items():
            out.setdefault(name, []).extend(modules)
    return out


def _has_member(cls: type, name: str) -> bool:
    """A class attribute, or an instance attribute its own code sets or annotates."""
    if hasattr(cls, name):
        return True
    for klass in cls.__mro__:
        if name in getattr(klass, "__annotations__", {}):
            return True
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        if re.search(rf"self\.{re.escape(name)}\b\s*(?::[^=\n]+)?=", source):
            return True
    return False


def _walk(target: object, parts: list[str]) -> bool:
    for index, part in enumerate(parts):
        if isinstance(target, type) and not hasattr(target, part):
            return index == len(parts) - 1 and _has_member(target, part)
        if not hasattr(target, part):
            return False
        target = getattr(target, part)
    return True


def resolves_in_code(name: str, folders: tuple[str, ...]) -> bool:
    """``policy/victims.decide``, ``kube.reflector.Store``, ``app/kube/peers.py``,
    ``wiring.Runway.start``, ``server.settle_heap()``: a module of app/ and attributes in it
    (with tests in ``folders``: ``builders.queued_pod`` is ``tests.builders.queued_pod``)."""
    name = re.sub(r"\(.*\)$", "", name).removesuffix(".py").removesuffix("/")
    parts = re.split(r"[./]", name)
    if parts[0] not in folders:
        parts = ["app", *parts] if parts[0] in APP_TOP else ["tests", *parts]
    if parts[0] not in folders:
        return False
    for cut in range(len(parts), 1, -1):
        where = ROOT.joinpath(*parts[:cut])
        if where.with_suffix(".py").is_file() or (where / "__init__.py").is_file():
            return _walk(importlib.import_module(".".join(parts[:cut])), parts[cut:])
    return False


def resolves_as_member(name: str, folders: tuple[str, ...]) -> bool:
    """``ClusterCache.expect``: a class (of any module under ``folders``) with that member."""
    head, _, rest = re.sub(r"\(.*\)$", "", name).partition(".")
    for module in classes_named(folders).get(head, []):
        if _walk(getattr(importlib.import_module(module), head), rest.split(".")):
            return True
    return False


def resolves_in_a_library(name: str) -> bool:
    """``httpx.MockTransport``, ``hmac.compare_digest``: a name in a module runway imports."""
    head, *rest = re.sub(r"\(.*\)$", "", name).split(".")
    if head in (*APP_TOP, "app", "tests", "bench") or importlib.util.find_spec(head) is None:
        return False
    return _walk(importlib.import_module(head), rest)


@functools.cache
def config_keys() -> frozenset[str]:
    """Every key path of the config file (as docs/configuration.md lists them), retired included."""
    from app.config.loader import RETIRED
    from app.config.reference import rows

    keys = {re.match(r"\| `([^`]+)`", row)[1] for row in rows()}  # type: ignore[index]
    keys |= {".".join(path) for path in RETIRED}
    return frozenset(keys)


def _key_matches(name: str, keys: frozenset[str], partial: bool) -> bool:
    name = re.sub(r"\[\]", "[]", name)
    if "*" in name:
        return any(fnmatch.fnmatchcase(k, name) for k in keys)
    return name in keys or (partial and any(k.endswith("." + name) for k in keys))


def resolves_as_config_key(name: str) -> bool:
    """``waitForPodsReady.timeout``, ``queues[].namespaceSelector``, ``minRuntime.default*``;
    ``sar.group`` (the end of ``auth.sar.group``, where the text is about that section)."""
    return _key_matches(name, config_keys(), partial=True)


def _schema_paths(schema: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for key, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}.{key}" if prefix else key
        yield path
        if isinstance(sub, dict):
            yield from _schema_paths(sub, path)
            if isinstance(sub.get("items"), dict):
                yield from _schema_paths(sub["items"], path + "[]")
            if isinstance(sub.get("additionalProperties"), dict):
                yield from _schema_paths(sub["additionalProperties"], path + ".<key>")


def _dict_paths(data: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(data, dict):
        for key, sub in data.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path
            yield from _dict_paths(sub, path)
    elif isinstance(data, list):
        for item in data:
            yield from _dict_paths(item, prefix + "[]")


@functools.cache
def chart_values() -> frozenset[str]:
    """The chart's values: values.yaml's keys and values.schema.json's properties."""
    chart = ROOT / "helm" / "runway"
    keys = set(_dict_paths(yaml.safe_load((chart / "values.yaml").read_text())))
    keys |= set(_schema_paths(json.loads((chart / "values.schema.json").read_text())))
    return frozenset(keys)


def resolves_as_chart_value(name: str) -> bool:
    """``tls.enabled``, ``scheduler.extender.ignorable``; ``config.X`` is the config file's X."""
    if name.startswith("config."):
        return resolves_as_config_key(name.removeprefix("config."))
    return _key_matches(name, chart_values(), partial=False)


@functools.cache
def record_fields() -> frozenset[str]:
    """The WorkloadRecord's fields (its CRD's schema)."""
    (crd,) = (ROOT / "helm" / "runway" / "crds").glob("*.yaml")
    version = yaml.safe_load(crd.read_text())["spec"]["versions"][0]
    return frozenset(_schema_paths(version["schema"]["openAPIV3Schema"]))


@functools.cache
def rest_fields() -> frozenset[str]:
    """Field paths of the REST answers (the OpenAPI document's schemas, refs followed)."""
    schemas = json.loads((ROOT / "openapi" / "openapi.json").read_text())["components"]["schemas"]

    def refs(schema: dict[str, Any]) -> list[dict[str, Any]]:
        if "$ref" in schema:
            return [schemas[schema["$ref"].rsplit("/", 1)[1]]]
        nested = [s for key in ("anyOf", "allOf", "oneOf") for s in schema.get(key, [])]
        if "items" in schema:
            nested.append(schema["items"])
        if isinstance(schema.get("additionalProperties"), dict):
            nested.append(schema["additionalProperties"])
        return [s for n in nested for s in ([n] if "properties" in n else refs(n))]

    def paths(schema: dict[str, Any], prefix: str, depth: int) -> Iterator[str]:
        if depth > 6:
            return
        for key, sub in schema.get("properties", {}).items():
            path = f"{prefix}.{key}" if prefix else key
            yield path
            for target in [sub] if "properties" in sub else refs(sub):
                yield from paths(target, path, depth + 1)

    return frozenset(p for s in schemas.values() for p in paths(s, "", 0))


@functools.cache
def object_fields() -> frozenset[str]:
    """Field paths of the API objects runway decodes (app/model's msgspec structs)."""

    def structs_in(annotation: Any) -> list[type[msgspec.Struct]]:
        if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
            return [annotation]
        return [s for arg in getattr(annotation, "__args__", ()) for s in structs_in(arg)]

    def paths(cls: type[msgspec.Struct], prefix: str, depth: int) -> Iterator[str]:
        if depth > 5:
            return
        for field in msgspec.structs.fields(cls):
            path = f"{prefix}.{field.encode_name}" if prefix else field.encode_name
            yield path
            for sub in structs_in(field.type):
                yield from paths(sub, path, depth + 1)

    out: set[str] = set()
    for path in (APP / "model").glob("*.py"):
        module = importlib.import_module(f"app.model.{path.stem}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, msgspec.Struct)
                and value.__module__ == module.__name__
            ):
                out.update(paths(value, "", 0))
    return frozenset(out)


def resolves_as_field(name: str) -> bool:
    """``status.life.created`` (the WorkloadRecord), ``life.members.sizeSource`` (a REST answer),
    ``spec.nodeName`` (a Pod as runway decodes it)."""
    return any(name in fields for fields in (record_fields(), rest_fields(), object_fields()))


@functools.cache
def metric_names() -> dict[str, tuple[str, ...]]:
    """runway's metrics (name → labels) and the standard collectors' series."""
    from app import metrics

    names = {name: labels for name, _, labels, _ in metrics._reference_rows()}
    names.update({name: () for name in metrics.STANDARD_SERIES})
    return names


def resolves_as_metric(span: str) -> bool:
    """``runway_victims_total{decision="budget"}``: the metric, and the labels it is sliced by."""
    name, _, labels = span.partition("{")
    names = metric_names()
    matching = [n for n in names if fnmatch.fnmatchcase(n, name)]
    if not matching and re.sub(r"_(bucket|sum|count)$", "", name) in names:
        matching = [re.sub(r"_(bucket|sum|count)$", "", name)]
    if not matching:
        return False
    used = re.findall(r"(\w+)\s*(?:[!=]~?|\}|,|$)", labels.rstrip("}")) if labels else []
    return all(any(label in names[n] for n in matching) for label in used)


@functools.cache
def rest_paths() -> list[re.Pattern[str]]:
    document = json.loads((ROOT / "openapi" / "openapi.json").read_text())
    return [
        re.compile("^" + re.sub(r"\\\{\w+\\\}", r"[^/:]+", re.escape(path)) + "$")
        for path in document["paths"]
    ]


def resolves_as_rest_path(path: str) -> bool:
    """``GET /v1/workloads/{ns}/{name}``, ``/v1/explain?preemptor=NS/P``, ``/v1/...``."""
    path = path.split("?", 1)[0]
    if path in NON_OPENAPI_PATHS:
        return True
    if path.endswith(("/...", "/")) or path == "/v1":  # a prefix: every path under it
        prefix = path.removesuffix("...").removesuffix("/") + "/"
        return any(p.pattern.startswith("^" + re.escape(prefix)) for p in rest_paths())
    path = re.sub(r"\{\w+\}|\b[A-Z]+\b", "x", path)
    return any(p.match(path) for p in rest_paths())


def resolves_as_command(program: str, rest: str) -> bool:
    """``python -m app check-config FILE``: the subcommand and its flags; ``python -m bench.X``:
    the benchmark's module."""
    if program.startswith("bench."):
        return (ROOT / "bench" / (program.removeprefix("bench.") + ".py")).is_file()
    from app.__main__ import build_parser

    words = shlex.split(rest.split(">", 1)[0])
    if not words:
        return True
    sub = next(a for a in build_parser()._actions if a.choices)  # the subcommands
    parser = sub.choices.get(words[0])  # type: ignore[union-attr]
    if parser is None:
        return False
    flags = [w.split("=", 1)[0] for w in words[1:] if w.startswith("-")]
    return all(flag in parser._option_string_actions for flag in flags)


@functools.cache
def ignored_paths() -> tuple[str, ...]:
    """What .gitignore keeps out of the repository (bench/out/: made by running a benchmark)."""
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return tuple(line for line in lines if line.endswith("/") and not line.startswith("*"))


def resolves_as_path(span: str) -> bool:
    """A file or folder of the repository (``{a,b}`` and ``*`` expanded)."""
    span = span.split("::", 1)[0]
    if span.startswith(ignored_paths()):
        return True
    brace = re.search(r"\{([^}]+)\}", span)
    options = (
        [span[: brace.start()] + alt + span[brace.end() :] for alt in brace[1].split(",")]
        if brace
        else [span]
    )
    return all(any(ROOT.glob(option.rstrip("/"))) for option in options)


@functools.cache
def repository_files() -> tuple[Path, ...]:
    """The repository's files (not the virtualenv's, caches' or git's)."""
    out = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in {"__pycache__", "build"}]
        out += [Path(folder, name) for name in files]
    return tuple(out)


def resolves_as_file_name(span: str, folders: tuple[str, ...]) -> bool:
    """``values.schema.json``, ``test_install_e2e.py``: a file of that name in the repository;
    ``tls.crt``: a name the code or the chart spells (a Secret's key)."""
    if span in {path.name for path in repository_files()}:
        return True
    return span in vocabulary(folders)[1] or span in chart_words()


@functools.cache
def collected_tests() -> dict[str, set[str]]:
    """test file (relative to tests/) → its test functions."""
    out: dict[str, set[str]] = {}
    for path in (ROOT / "tests").rglob("test_*.py"):
        source = path.read_text(encoding="utf-8")
        names = set(re.findall(r"^(?:async )?def (test_\w+)\(", source, re.M))
        out[str(path.relative_to(ROOT / "tests"))] = names
    return out


def resolves_as_test(span: str) -> bool:
    """``unit/policy/test_gate.py``, ``e2e/test_x.py::test_y``, ``::test_y``, ``test_y``."""
    if bare := TEST_NAME.match(span):
        return any(bare[1] in names for names in collected_tests().values())
    file, _, test = span.removeprefix("tests/").partition("::")
    if file not in collected_tests():
        return False
    return not test or test in collected_tests()[file]


@functools.cache
def record_api_versions() -> frozenset[str]:
    """``runway.dev/v1alpha1``: the WorkloadRecord CRD's group/version pairs."""
    (crd,) = (ROOT / "helm" / "runway" / "crds").glob("*.yaml")
    spec = yaml.safe_load(crd.read_text())["spec"]
    return frozenset(f"{spec['group']}/{v['name']}" for v in spec["versions"])


def resolves_as_runway_name(span: str, folders: tuple[str, ...]) -> bool:
    """``runway.dev/min-available``, ``runway.dev/eviction-*``: a label, annotation or API
    version that the code or the chart spells."""
    name = RUNWAY_NAME.match(span)[0]  # type: ignore[index]
    spelled = vocabulary(folders)[1] | chart_words()  # a wildcard: any word it matches
    if "*" in name:
        return any(fnmatch.fnmatchcase(word, name) for word in spelled)
    return name in spelled or name in record_api_versions()


def resolves_as_resource(span: str, folders: tuple[str, ...]) -> bool:
    """``jobs.batch``, ``workloadrecords.runway.dev``: an API resource whose name and group the
    code or the chart (its RBAC rules) spells."""
    plural, _, group = span.partition(".")
    spelled = vocabulary(folders)[1] | chart_words()
    return plural in spelled and group in spelled


def unresolved(
    span: str, folders: tuple[str, ...] = ("app",), *, exceptions: bool = True
) -> str | None:
    """Why ``span`` names nothing that exists, or None (it resolves, or is no name at all).
    ``folders``: where the document's code names live (app; tests for tests/README.md);
    ``exceptions``: whether ``ELSEWHERE`` counts."""
    if (exceptions and span in ELSEWHERE) or span.endswith(".go"):  # Go: kube-scheduler's
        return None
    head = span.split(": ", 1)[0] if re.match(r"^[\w.\[\]<>*-]+: ", span) else span
    if span.startswith("tests/") or ROOT_PATH.match(span):
        if "::" in span and not resolves_as_test(span):
            return "no such test"
        return None if resolves_as_path(span) else "no such file"
    if TEST_FILE.match(span) or TEST_NAME.match(span):
        return None if resolves_as_test(span) else "no such test"
    if METRIC.match(span):
        return None if resolves_as_metric(span) else "no such metric or label"
    if rest := REST.match(span):
        return None if resolves_as_rest_path(rest[2]) else "no such REST path"
    if bench := BENCH.match(span):
        return None if (ROOT / "bench" / f"{bench[1]}.py").is_file() else "no such benchmark"
    if command := COMMAND.match(span):
        return None if resolves_as_command(command[1], command[2]) else "no such command or flag"
    if RUNWAY_NAME.match(span):
        spelled = resolves_as_runway_name(span, folders)
        return None if spelled else "the code and the chart never spell it"
    if FILE_NAME.match(span):
        return None if resolves_as_file_name(span, folders) else "no such file"
    if RESOURCE.match(span):
        return None if resolves_as_resource(span, folders) else "no such API resource"
    if DOTTED.match(head) and not TEMPLATE.search(head):
        if "/" in head and head.split("/")[0] not in PACKAGES:
            return None  # an API group (batch/v1), a Go file, a subresource: not runway's
        readings = (
            lambda name: resolves_in_code(name, folders),
            resolves_as_config_key,
            resolves_as_chart_value,
            resolves_as_field,
            lambda name: resolves_as_member(name, folders),
            resolves_in_a_library,
        )
        return None if any(read(head) for read in readings) else "resolves to nothing"
    if SNAKE.match(head) or CAMEL.match(head):
        name = head.removesuffix("()")
        defined, spelled = vocabulary(folders)
        known = name in defined or name in spelled or name in chart_words()
        return None if known else "defined and spelled nowhere"
    return None


def test_every_name_in_the_documents_exists() -> None:
    broken = [
        f"{path.relative_to(ROOT)}:{line}: `{span}`: {why}"
        for path in DOCS
        for line, span in spans(path)
        if (why := unresolved(span, SCOPE.get(path, ("app",))))
    ]
    assert not broken, "names in the documents that do not exist:\n" + "\n".join(broken)


def test_every_exception_is_cited_and_needed() -> None:
    cited = {span for path in DOCS for _, span in spans(path)}
    stale = sorted(set(ELSEWHERE) - cited)
    assert not stale, f"no document cites these ELSEWHERE entries any more: {stale}"
    needless = sorted(name for name in ELSEWHERE if unresolved(name, exceptions=False) is None)
    assert not needless, f"these ELSEWHERE entries resolve without the list: {needless}"


@pytest.mark.parametrize(
    ("span", "resolves"),
    [
        ("policy/victims.decide", True),
        ("policy/victims.decide(claimed=...)", True),
        ("kube.reflector.Store", True),
        ("app/kube/peers.py", True),
        ("wiring.Runway.start", True),
        ("ClusterCache.expect", True),
        ("waitForPodsReady.blockAdmission", True),
        ("queues[].namespaceSelector.matchLabels", True),
        ("tls.enabled", True),
        ("config.auth.protectReadOnly: false", True),
        ("status.life.started", True),
        ("runway_victims_total{decision}", True),
        ("GET /v1/workloads/NS/NAME", True),
        ("python -m app check-config FILE", True),
        ("unit/policy/test_claims.py", True),
        ("state.records.OwnerIndex", False),
        ("policy/claims.no_such_rule", False),
        ("waitForPodsReady.noSuchKey", False),
        ("runway_victims_total{no_such_label}", False),
        ("GET /v1/nothing", False),
        ("python -m app no-such-command", False),
        ("app/kube/records.py", False),
        ("unit/policy/test_claims.py::test_nothing_by_this_name", False),
        ("RecordWriter", False),
        ("kubernetes.noSuchKey", False),
        ("ClusterCache.no_such_method", False),
        ("runway.dev/no-such-annotation", False),
        ("runway_no_such_metric_total", False),
        ("tls.noSuchValue", False),
        ("status.life.noSuchFact", False),
        ("bench.no_such_benchmark", False),
        ("record_writer_of", False),
        ("the gate opens", True),  # prose: not a name
        ("batch/v1", True),  # an API group: not runway's
    ],
)
def test_the_resolver_reads_each_shape(span: str, resolves: bool) -> None:
    assert (unresolved(span) is None) is resolves, unresolved(span)


# -- DESIGN § citations -------------------------------------------------------------------


def design_sections() -> set[str]:
    text = (ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", text, re.M))


def test_every_design_section_cited_anywhere_exists() -> None:
    sections = design_sections()
    cite = re.compile(r"DESIGN(?:\.md)?,? ((?:§\d+(?:\.\d+)?(?:, | and |-)?)+)")
    broken = []
    for folder in ("app", "tests", "bench", "docs", "helm"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix not in {".py", ".md", ".yaml", ".tpl", ".txt"} or "data" in path.parts:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for group in cite.findall(line):
                    for ref in re.findall(r"§(\d+(?:\.\d+)?)", group):
                        if ref not in sections:
                            broken.append(f"{path.relative_to(ROOT)}:{number}: DESIGN §{ref}")
    assert not broken, "DESIGN sections that do not exist:\n" + "\n".join(broken)


# -- the map of app/ in ARCHITECTURE.md -----------------------------------------------------

MAP_ENTRY = re.compile(r"^(?P<indent> {2,8})(?P<names>[\w.]+/?(?: / [\w.]+/?)*)(?=\s|$|:)")


def mapped_modules() -> list[str]:
    """The modules and packages the map lists, as paths under app/ (``policy/victims/``)."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```\n(.*?)```", text, re.S) if b.startswith("app/\n"))
    out: list[str] = []
    parents: list[tuple[int, str]] = []  # (indent, package path) of the open packages
    for line in block.splitlines()[1:]:
        if not line.startswith(" "):
            break  # tests/, bench/: the map of app/ ends
        if line.startswith(" " * 9):
            continue  # a description's next line
        match = MAP_ENTRY.match(line)
        if match is None:
            continue
        indent = len(match["indent"])
        while parents and parents[-1][0] >= indent:
            parents.pop()
        prefix = parents[-1][1] if parents else ""
        names = match["names"].split(" / ")
        suffix = ".py" if names[-1].endswith(".py") else ""
        for name in names:
            entry = prefix + (name if name.endswith((".py", "/")) else name + suffix)
            out.append(entry)
            if entry.endswith("/"):
                parents.append((indent, entry))
    return out


def test_the_map_lists_each_module_once_and_each_exists() -> None:
    entries = mapped_modules()
    twice = sorted({e for e in entries if entries.count(e) > 1})
    assert not twice, f"listed twice in docs/ARCHITECTURE.md's map: {twice}"
    missing = [e for e in entries if not (APP / e).exists()]
    assert not missing, f"in docs/ARCHITECTURE.md's map, not in app/: {missing}"


def test_every_module_of_app_is_in_the_map() -> None:
    entries = set(mapped_modules())
    modules = {str(p.relative_to(APP)) for p in APP.rglob("*.py") if p.name != "__init__.py"} | {
        str(p.relative_to(APP)) + "/" for p in APP.rglob("*") if (p / "__init__.py").is_file()
    }
    assert not modules - entries, f"not in docs/ARCHITECTURE.md's map: {sorted(modules - entries)}"


def test_the_benchmarks_the_map_names_exist() -> None:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```\n(.*?)```", text, re.S) if b.startswith("app/\n"))
    bench = block[block.index("\nbench/") :]
    named = re.findall(r"[\w/]+\.py", bench)
    assert len(named) > 5
    missing = [n for n in named if not ((ROOT / "bench" / n).is_file() or (ROOT / n).is_file())]
    assert not missing, f"ARCHITECTURE.md's bench/ entry: no such file {missing}"
