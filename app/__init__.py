"""runway: a kube-scheduler extender for minimum runtime, requeue ordering and async preemption.

Comments cite the design as ``DESIGN §N``: the sections of docs/DESIGN.md.
"""

__version__ = "0.1.0"
