// name: search-entities
// doc: Full-text search of entity names, ids and aliases (indexes sgam_entity_name and sgam_entity_alias, Lucene query syntax) within one tenant, best match first: finds the subjects a question names. An entity merged into another is found as that one (its names became aliases there).
// param: tenant string  the tenant id
// param: text string  a Lucene query, e.g. mira OR ada
// param: k int[1..1000]  at most this many entities
// example: :param tenant => 'demo'
// example: :param text => 'ada'
// example: :param k => 10
CALL () {
  CALL db.index.fulltext.queryNodes('sgam_entity_name', $text) YIELD node AS e, score
  WHERE e.tenant_id = $tenant AND e.merged_into IS NULL
  RETURN e, score
  UNION ALL
  CALL db.index.fulltext.queryNodes('sgam_entity_alias', $text) YIELD node AS a, score
  WHERE a.tenant_id = $tenant
  MATCH (a)-[:ALIAS_OF]->(e:Entity)
  RETURN e, score
}
WITH e, max(score) AS score
RETURN e.id AS id, e.name AS name, e.type AS type,
       COLLECT { MATCH (x:Alias)-[:ALIAS_OF]->(e) RETURN x.name ORDER BY x.key } AS aliases, score
ORDER BY score DESC, id
LIMIT $k
