// name: knn-statements
// doc: Attribute facts whose statement (subject, attribute, value; embedded on the Value node, vector index sgam_value_embedding) is nearest in meaning to a vector, kept only for the tenant, with min_score, and only the fact versions valid at valid_at and believed now; the tenant's candidates are scored exactly (the index's scores are approximate); fetched and floor (the lowest index score read) tell the caller whether to fetch more. A small tenant can be crowded out of the fetch nearest by a large one: knn-statements-exact gives its true top k.
// param: tenant string  the tenant id
// param: vector vector  the question's embedding (384 floats)
// param: fetch int[1..10000]  how many nearest neighbours to read from the index before filtering
// param: k int[1..1000]  at most this many hits are returned
// param: min_score float[0..1]  the lowest similarity kept (Neo4j's cosine score, (1 + cos) / 2)
// param: valid_at datetime  the instant the fact versions must be valid at
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// param: memory_types list?  only facts of these memory types (each attribute's memory_type in the schema), e.g. preference,task_state; null = every type
// example: :param tenant => 'demo'
// example: :param vector => COLLECT { MATCH (v:Value {tenant_id: 'demo'}) WHERE v.embedding IS NOT NULL RETURN v.embedding LIMIT 1 }[0]
// example: :param fetch => 100
// example: :param k => 5
// example: :param min_score => 0.6
// example: :param valid_at => datetime()
// example: :param principal => null
// example: :param memory_types => null
CALL db.index.vector.queryNodes('sgam_value_embedding', $fetch, $vector) YIELD node AS v, score
WITH count(*) AS fetched, min(score) AS floor, collect(CASE WHEN v.tenant_id = $tenant THEN v END) AS mine
// The index's scores are approximate (quantised vectors): the tenant's candidates are scored exactly.
CALL (mine) {
  UNWIND mine AS v
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
RETURN fetched, floor, hits
