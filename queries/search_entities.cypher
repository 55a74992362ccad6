// name: search-entities
// doc: Full-text search of entity names and ids (index sgam_entity_name, Lucene query syntax) within one tenant, best match first: finds the subjects a question names.
// param: tenant string  the tenant id
// param: text string  a Lucene query, e.g. mira OR ada
// param: k int[1..1000]  at most this many entities
// example: :param tenant => 'demo'
// example: :param text => 'ada'
// example: :param k => 10
CALL db.index.fulltext.queryNodes('sgam_entity_name', $text) YIELD node AS e, score
WHERE e.tenant_id = $tenant
RETURN e.id AS id, e.name AS name, e.type AS type, score
LIMIT $k
