"""Kubernetes I/O: cluster access (``access``), the verb-family client (``client``) over REST
``resources`` with a client-side rate limit (``ratelimit``) and the watch stream (``watch``),
typed API errors (``errors``), bounded retries (``retry``), list+watch into the cache
(``reflector``), Lease leader election (``leader``) and the auth reviews (``reviews``).
Nothing above this package talks to the API server directly.
"""
