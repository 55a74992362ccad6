// name: knn-entities-exact
// doc: The exact top k of the tenant's entities by cosine similarity to a vector, with the same filters as knn-entities (taking part in a fact valid at valid_at and believed now, visible, at least min_score): the tenant's own entities are found by their tenant_id index and each is scored, so no other tenant can crowd them out. Scanning costs grow with the tenant's size: when the tenant holds more than exact_limit entities nothing is scored and exact is false (then use knn-entities); null scans every one. scanned counts the entities seen.
// param: tenant string  the tenant id
// param: vector vector  the question's embedding (384 floats)
// param: k int[1..1000]  at most this many hits are returned
// param: min_score float[0..1]  the lowest similarity kept (Neo4j's cosine score, (1 + cos) / 2)
// param: valid_at datetime  the instant the entity's facts must be valid at
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// param: exact_limit int[0..]?  score only a tenant of at most this many entities; null = any size
// example: :param tenant => 'demo'
// example: :param vector => COLLECT { MATCH (e:Entity {tenant_id: 'demo', id: 'cust-ada'}) RETURN e.embedding }[0]
// example: :param k => 5
// example: :param min_score => 0.6
// example: :param valid_at => datetime()
// example: :param principal => null
// example: :param exact_limit => 5000
// Collecting the node references reads no property: the size check costs one index entry a node.
MATCH (e:Entity {tenant_id: $tenant})
WITH e LIMIT coalesce($exact_limit + 1, 9223372036854775807)
WITH collect(e) AS tenant_entities
WITH tenant_entities, $exact_limit IS NULL OR size(tenant_entities) <= $exact_limit AS exact
CALL (tenant_entities, exact) {
  UNWIND CASE WHEN exact THEN tenant_entities ELSE [] END AS e
  WITH e, vector.similarity.cosine(e.embedding, $vector) AS score
  WHERE score >= $min_score
    AND EXISTS { MATCH (e)-[f]-() WHERE f.memory_id IS NOT NULL AND f.expired_at IS NULL
                   AND f.status = 'confirmed' AND f.valid_from <= $valid_at
                   AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
                   AND (f.valid_to IS NULL OR $valid_at < f.valid_to) }
  ORDER BY score DESC LIMIT $k
  RETURN collect(e {.id, .name, .type, score: score}) AS hits
}
RETURN exact, size(tenant_entities) AS scanned, hits
