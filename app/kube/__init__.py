"""Kubernetes I/O: cluster access and the verb-family client (``client``), typed API errors
(``errors``), bounded retries (``retry``), list+watch into the cache (``reflector``) and Lease
leader election (``leader``). Nothing above this package talks to the API server directly.
"""
