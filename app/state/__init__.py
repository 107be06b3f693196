"""What runway knows: the cluster cache fed by the reflectors (``cache``), the gate (``gate``) and
the records built on them. Synchronous, in memory, read by the verbs without awaiting."""
