// name: knn-episodes-exact
// doc: The exact top k of the tenant's episodes by cosine similarity to a vector, with the same filters as knn-episodes (occurred by valid_at, not redacted, visible, at least min_score): the tenant's own episodes are found by their tenant_id index and each is scored, so no other tenant can crowd them out. Scanning costs grow with the tenant's size: when the tenant holds more than exact_limit episodes nothing is scored and exact is false (then use knn-episodes); null scans every one. scanned counts the episodes seen.
// param: tenant string  the tenant id
// param: vector vector  the question's embedding (384 floats)
// param: k int[1..1000]  at most this many hits are returned
// param: min_score float[0..1]  the lowest similarity kept (Neo4j's cosine score, (1 + cos) / 2)
// param: valid_at datetime  only episodes that occurred at or before this instant
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// param: exact_limit int[0..]?  score only a tenant of at most this many episodes; null = any size
// example: :param tenant => 'demo'
// example: :param vector => COLLECT { MATCH (e:Episode {tenant_id: 'demo', id: 'e2'}) RETURN e.embedding }[0]
// example: :param k => 5
// example: :param min_score => 0.6
// example: :param valid_at => datetime()
// example: :param principal => null
// example: :param exact_limit => 5000
// Collecting the node references reads no property: the size check costs one index entry a node.
MATCH (ep:Episode {tenant_id: $tenant})
WITH ep LIMIT coalesce($exact_limit + 1, 9223372036854775807)
WITH collect(ep) AS tenant_episodes
WITH tenant_episodes, $exact_limit IS NULL OR size(tenant_episodes) <= $exact_limit AS exact
CALL (tenant_episodes, exact) {
  UNWIND CASE WHEN exact THEN tenant_episodes ELSE [] END AS ep
  WITH ep, vector.similarity.cosine(ep.embedding, $vector) AS score
  WHERE score >= $min_score AND ep.occurred_at <= $valid_at AND ep.redacted_at IS NULL
    AND (ep.visible_to IS NULL OR $principal = '*' OR $principal IN ep.visible_to)
  ORDER BY score DESC LIMIT $k
  RETURN collect(ep {.id, .content, .actor, .kind, occurred_at: toString(ep.occurred_at), score: score}) AS hits
}
RETURN exact, size(tenant_episodes) AS scanned, hits
