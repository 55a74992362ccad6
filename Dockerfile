# The SGAM service (`sgam serve`: the HTTP API under /v1 and MCP at /mcp) in a container.
# Used by the `sgam` service of docker-compose.yml, next to Neo4j:
#
#   NEO4J_PASSWORD='a-long-secret' docker compose up -d
#   docker compose run --rm sgam sgam keys create --tenant acme --principal agent:support --scope write
#
# It binds 0.0.0.0 inside the container, so it refuses to start until a key exists: create one
# first (the command above), then `docker compose up -d sgam`.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY graph ./graph
COPY ingest ./ingest
COPY queries ./queries
COPY sgam ./sgam
RUN pip install '.[service]' && useradd --system --uid 10001 sgam

USER sgam
EXPOSE 8080
CMD ["sgam", "serve", "--host", "0.0.0.0", "--port", "8080"]
