"""``kubectl runway``: the kubectl plugin people use to see what runway is doing.

A client of runway's REST API, not part of the server: it reaches runway through the API
server's service proxy with the user's own kubeconfig (``target``), pages every list
(``client``), and prints tables like kubectl's or JSON/YAML (``render``); ``cli`` is the
``kubectl-runway`` console script.
"""
