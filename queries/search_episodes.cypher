// name: search-episodes
// doc: Full-text search of episode text (index sgam_episode_text, Lucene query syntax) within one tenant, among episodes that occurred by valid_at and are not redacted, best match first.
// param: tenant string  the tenant id
// param: text string  a Lucene query, e.g. passport OR deadline (words are lower-cased; AND, OR, quotes and * work)
// param: valid_at datetime  only episodes that occurred at or before this instant
// param: k int[1..1000]  at most this many episodes
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// example: :param tenant => 'demo'
// example: :param text => 'passport'
// example: :param valid_at => datetime()
// example: :param k => 10
// example: :param principal => null
CALL db.index.fulltext.queryNodes('sgam_episode_text', $text) YIELD node AS ep, score
WHERE ep.tenant_id = $tenant AND ep.occurred_at <= $valid_at AND ep.redacted_at IS NULL
  AND (ep.visible_to IS NULL OR $principal = '*' OR $principal IN ep.visible_to)
RETURN ep.id AS id, ep.content AS content, ep.actor AS actor, ep.kind AS kind,
       toString(ep.occurred_at) AS occurred_at, score
LIMIT $k
