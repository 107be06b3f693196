"""``admission:`` — how runway holds the pods its admission chain does not admit yet.

```yaml
admission:
  schedulingGates: auto   # auto | true | false
```

Every hold (requeue backoff, deactivation, blockAdmission, StrictFIFO, a queue's order) is a
``filter`` rejection on a release without scheduling gates. Where the cluster has them, runway's
mutating webhook (``POST /webhooks/gate``) adds the gate ``runway.dev/admission`` to each pod it
will manage when the pod is created, and the leader removes it when the admission chain admits
the workload (DESIGN §5.8). The filter stays authoritative for every pod without the gate.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from app.config.section import Section


class AdmissionConfig(Section):
    """Holds as scheduling gates (issue #34)."""

    scheduling_gates: bool | Literal["auto"] = Field(
        "auto",
        description="Hold pods with the scheduling gate `runway.dev/admission` (added by "
        "runway's webhook at creation, removed by the leader when the workload is admitted) "
        "instead of a `filter` rejection: a gated pod costs kube-scheduler no cycle, is not "
        "demand for Cluster Autoscaler or Karpenter, and shows `SchedulingGated`. `auto` "
        "(default): on where the scheduler's release has scheduling gates (GA in 1.30; "
        "`kubernetes.schedulerVersion` or the API server's); off on older releases. `true`: on "
        "from 1.26 (alpha 1.26, beta 1.27 to 1.29: the PodSchedulingReadiness feature must be "
        "on). `false`: the webhook adds no gate (the leader still removes the gates it added "
        "before). Register the webhook too (the chart's `admissionWebhook`).",
    )
