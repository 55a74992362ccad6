// name: knn-statements-exact
// doc: The exact top k attribute facts of the tenant by the cosine similarity of their statement (embedded on the Value node) to a vector, with the same filters as knn-statements (valid at valid_at, believed now, visible, of the memory types asked, at least min_score): the tenant's own value nodes are found by their tenant_id index and each is scored, so no other tenant can crowd them out. Scanning costs grow with the tenant's size: when the tenant holds more than exact_limit value nodes nothing is scored and exact is false (then use knn-statements); null scans every one. scanned counts the value nodes seen.
// param: tenant string  the tenant id
// param: vector vector  the question's embedding (384 floats)
// param: k int[1..1000]  at most this many hits are returned
// param: min_score float[0..1]  the lowest similarity kept (Neo4j's cosine score, (1 + cos) / 2)
// param: valid_at datetime  the instant the fact versions must be valid at
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// param: memory_types list?  only facts of these memory types (each attribute's memory_type in the schema), e.g. preference,task_state; null = every type
// param: exact_limit int[0..]?  score only a tenant of at most this many value nodes; null = any size
// example: :param tenant => 'demo'
// example: :param vector => COLLECT { MATCH (v:Value {tenant_id: 'demo'}) WHERE v.embedding IS NOT NULL RETURN v.embedding LIMIT 1 }[0]
// example: :param k => 5
// example: :param min_score => 0.6
// example: :param valid_at => datetime()
// example: :param principal => null
// example: :param memory_types => null
// example: :param exact_limit => 5000
// Collecting the node references reads no property: the size check costs one index entry a node.
MATCH (v:Value {tenant_id: $tenant})
WITH v LIMIT coalesce($exact_limit + 1, 9223372036854775807)
WITH collect(v) AS tenant_values
WITH tenant_values, $exact_limit IS NULL OR size(tenant_values) <= $exact_limit AS exact
CALL (tenant_values, exact) {
  UNWIND CASE WHEN exact THEN tenant_values ELSE [] END AS v
  WITH v, vector.similarity.cosine(v.embedding, $vector) AS score
  WHERE score >= $min_score
  MATCH (v)<-[f]-(s)
  WHERE f.memory_id IS NOT NULL AND f.tenant_id = $tenant AND f.expired_at IS NULL AND f.status = 'confirmed'
    AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
    AND f.valid_from <= $valid_at AND (f.valid_to IS NULL OR $valid_at < f.valid_to)
    AND ($memory_types IS NULL OR f.memory_type IN $memory_types)
  WITH f, score ORDER BY score DESC LIMIT $k
  RETURN collect({score: score, fact: f {.*, valid_from: toString(f.valid_from), valid_to: toString(f.valid_to),
                  recorded_at: toString(f.recorded_at), expired_at: toString(f.expired_at),
                  last_confirmed_at: toString(f.last_confirmed_at),
                  value: CASE WHEN f.value_type IN ['date', 'datetime'] THEN toString(f.value) ELSE f.value END}})
         AS hits
}
RETURN exact, size(tenant_values) AS scanned, hits
