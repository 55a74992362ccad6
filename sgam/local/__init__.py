"""The local Neo4j: provisioning and running the server (server.py) and the Neo4j Browser tooling
(browser.py). The front door reaches a server through sgam.settings.resolve_connection only."""
