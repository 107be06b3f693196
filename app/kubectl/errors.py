"""The plugin's exit codes and the one error it raises: what a script can rely on."""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
"""runway or the API server answered an error not listed below, or an undecodable answer."""
EXIT_USAGE = 2
"""A bad command line (argparse's own code) or a 400 (runway said the request was wrong)."""
EXIT_NOT_FOUND = 3
"""The workload, pod or queue asked about is not known to runway."""
EXIT_FORBIDDEN = 4
"""401/403: the API server (or runway) refused the user."""
EXIT_UNREACHABLE = 5
"""runway could not be reached: no kubeconfig, no such service, no ready endpoint, a refused
or timed-out connection."""

EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_ERROR: "an error answered by runway or the API server",
    EXIT_USAGE: "bad command line, or runway refused the request as invalid (400)",
    EXIT_NOT_FOUND: "no such workload, pod or queue in runway",
    EXIT_FORBIDDEN: "not allowed (401/403 from the API server or runway)",
    EXIT_UNREACHABLE: "runway not reachable (kubeconfig, service, endpoints, network)",
}


class PluginError(Exception):
    """A failure to report on stderr and exit with ``code``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
