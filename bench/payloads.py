"""Synthetic extender payloads with production-sized nodes (~10 KB each).

Each node carries what a real cloud node reports: ~40 images with digests, ~20 labels, 5
conditions, addresses, capacity/allocatable and nodeInfo.
"""

from __future__ import annotations

import json
from typing import Any

_TS = "2026-11-22T04:19:23Z"


def node(i: int) -> dict[str, Any]:
    """One production-sized Node object (about 10 KB of JSON)."""
    name = f"node-{i:05d}"
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": "n2-standard-32",
        "node.kubernetes.io/instance-type": "n2-standard-32",
        "topology.kubernetes.io/region": "europe-west4",
        "topology.kubernetes.io/zone": f"europe-west4-{'abc'[i % 3]}",
        "failure-domain.beta.kubernetes.io/region": "europe-west4",
        "failure-domain.beta.kubernetes.io/zone": f"europe-west4-{'abc'[i % 3]}",
        "cloud.google.com/gke-nodepool": f"pool-{i % 4}",
        "cloud.google.com/gke-os-distribution": "cos",
        "cloud.google.com/machine-family": "n2",
        "cloud.google.com/gke-boot-disk": "pd-balanced",
        "cloud.google.com/gke-container-runtime": "containerd",
        "runway.dev/pool": f"pool-{i % 4}",
        "node-role.kubernetes.io/worker": "",
        "example.com/rack": f"rack-{i % 40}",
        "example.com/team": "ml-platform",
    }
    images = [
        {
            "names": [
                f"registry.example.com/team/image-{j}@sha256:{(i * 7919 + j * 104729):064x}",
                f"registry.example.com/team/image-{j}:v1.{j}.{i % 10}",
            ],
            "sizeBytes": 100_000_000 + j * 1_234_567,
        }
        for j in range(40)
    ]
    conditions = [
        {
            "type": t,
            "status": "True" if t == "Ready" else "False",
            "lastHeartbeatTime": _TS,
            "lastTransitionTime": _TS,
            "reason": f"Kubelet{t}",
            "message": f"kubelet reports {t} state for the node",
        }
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable", "Ready")
    ]
    resources = {
        "cpu": "32",
        "memory": "131900000Ki",
        "pods": "110",
        "ephemeral-storage": "98831908Ki",
        "hugepages-2Mi": "0",
    }
    return {
        "metadata": {
            "name": name,
            "uid": f"{i:08x}-0000-4000-8000-{i:012x}",
            "resourceVersion": str(1000 + i),
            "creationTimestamp": _TS,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {
            "podCIDR": f"10.{i // 250}.{i % 250}.0/24",
            "providerID": f"gce://project/europe-west4-a/{name}",
        },
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": f"10.128.{i // 250}.{i % 250}"},
                {"type": "ExternalIP", "address": f"34.90.{i // 250}.{i % 250}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"{i:032x}",
                "systemUUID": f"{i:032x}",
                "bootID": f"{i:032x}",
                "kernelVersion": "5.15.0-1049-gke",
                "osImage": "Container-Optimized OS",
                "containerRuntimeVersion": "containerd://1.7.10",
                "kubeletVersion": "v1.20.2",
                "kubeProxyVersion": "v1.20.2",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": images,
        },
    }


def pod() -> dict[str, Any]:
    """The pod being scheduled."""
    return {
        "metadata": {
            "name": "high-0",
            "namespace": "default",
            "uid": "pod-uid-high-0",
            "creationTimestamp": _TS,
            "labels": {"runway.dev/queue": "team-b", "runway.dev/workload": "serve"},
        },
        "spec": {
            "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "2"}}}
            ],
            "priority": 1000,
            "schedulerName": "default-scheduler",
        },
        "status": {"phase": "Pending"},
    }


def extender_args(n: int, mode: str) -> bytes:
    """An ``ExtenderArgs`` body for ``n`` nodes: mode ``names`` (nodeCacheCapable) or ``list``."""
    if mode == "names":
        body = {"Pod": pod(), "Nodes": None, "NodeNames": [f"node-{i:05d}" for i in range(n)]}
    else:
        body = {
            "Pod": pod(),
            "Nodes": {"metadata": {}, "items": [node(i) for i in range(n)]},
            "NodeNames": None,
        }
    return json.dumps(body, separators=(",", ":")).encode()


def victim(i: int, j: int) -> dict[str, Any]:
    """A running low-priority pod offered as a victim (about 3 KB, managedFields included)."""
    name = f"train-low-{i:05d}-{j}"
    fields = {
        "f:metadata": {
            "f:labels": {".": {}, "f:job-name": {}, "f:runway.dev/queue": {}},
            "f:ownerReferences": {".": {}, f'k:{{"uid":"job-{i:05d}"}}': {".": {}, "f:uid": {}}},
        },
        "f:spec": {
            "f:containers": {
                'k:{"name":"c"}': {
                    ".": {},
                    "f:image": {},
                    "f:resources": {".": {}, "f:requests": {".": {}, "f:cpu": {}}},
                }
            }
        },
        "f:status": {"f:conditions": {'k:{"type":"Ready"}': {".": {}, "f:status": {}}}},
    }
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"{i:08x}-{j:04x}-4000-8000-{i * 16 + j:012x}",
            "resourceVersion": str(20_000 + i * 16 + j),
            "creationTimestamp": _TS,
            "labels": {
                "job-name": f"train-low-{i:05d}",
                "runway.dev/queue": "team-a",
                "runway.dev/workload": f"train-low-{i:05d}",
            },
            "annotations": {"runway.dev/min-available": "1"},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": f"train-low-{i:05d}",
                    "uid": f"job-{i:05d}",
                    "controller": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": _TS,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields,
                }
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "registry.example.com/team/trainer:v1.4.2",
                    "resources": {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "nodeName": f"node-{i:05d}",
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": f"node.kubernetes.io/{t}",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
                for t in ("not-ready", "unreachable")
            ],
            "priorityClassName": "low",
            "priority": 100,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": _TS}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "hostIP": f"10.128.{i // 250}.{i % 250}",
            "podIP": f"10.{i // 250}.{i % 250}.{j + 2}",
            "startTime": _TS,
            "qosClass": "Burstable",
        },
    }


def preemption_args(n: int, mode: str, per_node: int = 2) -> bytes:
    """An ``ExtenderPreemptionArgs`` body offering ``per_node`` victims on each of ``n`` nodes.

    Mode ``names`` (nodeCacheCapable) sends ``NodeNameToMetaVictims`` (UIDs), ``list`` sends
    ``NodeNameToVictims`` with full pods.
    """
    pods = {f"node-{i:05d}": [victim(i, j) for j in range(per_node)] for i in range(n)}
    if mode == "names":
        meta = {
            node: {"Pods": [{"UID": p["metadata"]["uid"]} for p in ps], "NumPDBViolations": 0}
            for node, ps in pods.items()
        }
        body = {"Pod": pod(), "NodeNameToVictims": None, "NodeNameToMetaVictims": meta}
    else:
        full = {node: {"Pods": ps, "NumPDBViolations": 0} for node, ps in pods.items()}
        body = {"Pod": pod(), "NodeNameToVictims": full, "NodeNameToMetaVictims": None}
    return json.dumps(body, separators=(",", ":")).encode()
