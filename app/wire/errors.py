"""The one error the wire layer raises: a request kube-scheduler should never have sent."""


class WireError(ValueError):
    """A malformed extender request; the message says what is wrong and where (JSON path)."""
