// name: knn-episodes
// doc: Episodes whose text is nearest in meaning to a vector (vector index sgam_episode_embedding), kept only when they belong to the tenant, occurred by valid_at, are not redacted and score at least min_score. Neo4j 5 vector indexes cannot pre-filter, so the fetch nearest of all tenants are read and filtered, and the tenant's are scored exactly (the index's scores are approximate): fetched and floor (the lowest index score read) tell the caller whether to fetch more. A small tenant can be crowded out of the fetch nearest by a large one: knn-episodes-exact gives its true top k.
// param: tenant string  the tenant id
// param: vector vector  the question's embedding (384 floats, e.g. from the same model as the stored ones)
// param: fetch int[1..10000]  how many nearest neighbours to read from the index before filtering
// param: k int[1..1000]  at most this many hits are returned
// param: min_score float[0..1]  the lowest similarity kept (Neo4j's cosine score, (1 + cos) / 2)
// param: valid_at datetime  only episodes that occurred at or before this instant
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// example: :param tenant => 'demo'
// example: :param vector => COLLECT { MATCH (e:Episode {tenant_id: 'demo', id: 'e2'}) RETURN e.embedding }[0]
// example: :param fetch => 100
// example: :param k => 5
// example: :param min_score => 0.6
// example: :param valid_at => datetime()
// example: :param principal => null
CALL db.index.vector.queryNodes('sgam_episode_embedding', $fetch, $vector) YIELD node AS ep, score
WITH count(*) AS fetched, min(score) AS floor,
     collect(CASE WHEN ep.tenant_id = $tenant AND ep.occurred_at <= $valid_at AND ep.redacted_at IS NULL
                   AND (ep.visible_to IS NULL OR $principal = '*' OR $principal IN ep.visible_to)
                  THEN ep END) AS mine
// The index's scores are approximate (quantised vectors): the tenant's candidates are scored exactly.
CALL (mine) {
  UNWIND mine AS ep
  WITH ep, vector.similarity.cosine(ep.embedding, $vector) AS score
  WHERE score >= $min_score
  ORDER BY score DESC LIMIT $k
  RETURN collect(ep {.id, .content, .actor, .kind, occurred_at: toString(ep.occurred_at), score: score}) AS hits
}
RETURN fetched, floor, hits
