"""SGAM as a shared memory service: an HTTP API under ``/v1`` and an MCP server (``sgam serve``,
``sgam mcp``), with tenant and reader bound by an API key, never claimed by the caller.

Needs the ``service`` extra (``pip install 'sgam[service]'``) for the ASGI and MCP parts; the tool
definitions (:mod:`.tools`) and the key store (:mod:`.keys`) need nothing beyond SGAM itself.
"""
