"""The what-if simulator (``python -m app simulate``): a discrete-event replay of a workload trace
on a modelled cluster, deciding with runway's own policy functions (docs/simulator.md)."""
