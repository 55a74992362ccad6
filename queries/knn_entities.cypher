// name: knn-entities
// doc: Entities whose name is nearest in meaning to a vector (vector index sgam_entity_embedding), kept only when they belong to the tenant, take part in a fact valid at valid_at and believed now, and score at least min_score; the tenant's candidates are scored exactly (the index's scores are approximate); fetched and floor (the lowest index score read) tell the caller whether to fetch more. A small tenant can be crowded out of the fetch nearest by a large one: knn-entities-exact gives its true top k.
// param: tenant string  the tenant id
// param: vector vector  the question's embedding (384 floats)
// param: fetch int[1..10000]  how many nearest neighbours to read from the index before filtering
// param: k int[1..1000]  at most this many hits are returned
// param: min_score float[0..1]  the lowest similarity kept (Neo4j's cosine score, (1 + cos) / 2)
// param: valid_at datetime  the instant the entity's facts must be valid at
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// example: :param tenant => 'demo'
// example: :param vector => COLLECT { MATCH (e:Entity {tenant_id: 'demo', id: 'cust-ada'}) RETURN e.embedding }[0]
// example: :param fetch => 100
// example: :param k => 5
// example: :param min_score => 0.6
// example: :param valid_at => datetime()
// example: :param principal => null
CALL db.index.vector.queryNodes('sgam_entity_embedding', $fetch, $vector) YIELD node AS e, score
WITH count(*) AS fetched, min(score) AS floor,
     collect(CASE WHEN e.tenant_id = $tenant
                   AND EXISTS { MATCH (e)-[f]-() WHERE f.memory_id IS NOT NULL AND f.expired_at IS NULL
                                  AND f.status = 'confirmed' AND f.valid_from <= $valid_at
                                  AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
                                  AND (f.valid_to IS NULL OR $valid_at < f.valid_to) }
                  THEN e END) AS mine
// The index's scores are approximate (quantised vectors): the tenant's candidates are scored exactly.
CALL (mine) {
  UNWIND mine AS e
  WITH e, vector.similarity.cosine(e.embedding, $vector) AS score
  WHERE score >= $min_score
  ORDER BY score DESC LIMIT $k
  RETURN collect(e {.id, .name, .type, score: score}) AS hits
}
RETURN fetched, floor, hits
