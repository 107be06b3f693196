"""runway: a kube-scheduler extender for minimum runtime, requeue ordering and async preemption."""

__version__ = "0.1.0"
