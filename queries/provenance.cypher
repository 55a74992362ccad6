// name: provenance
// doc: Where a fact version came from: its episode and speaker, the extraction trail that wrote it (extractor, evidence quotes, compared value, decision; shown to readers of the episode), what it superseded and what superseded or revised it.
// param: tenant string  the tenant id
// param: subject string?  the entity the fact is about; null = any (the tenant's facts are scanned for memory_id: give the subject on a big tenant)
// param: memory_id string  the fact version (from current, as-of or history)
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// example: :param tenant => 'demo'
// example: :param subject => null
// example: :param memory_id => COLLECT { MATCH (:Entity {tenant_id: 'demo', id: 'mira'})-[f]->() WHERE f.attribute = 'passport_deadline' AND f.expired_at IS NULL RETURN f.memory_id ORDER BY f.valid_from DESC LIMIT 1 }[0]
// example: :param principal => null
// Two branches so that a given subject is an index seek and only a missing one scans the tenant.
CALL () {
  MATCH (s:Entity {tenant_id: $tenant, id: $subject})-[f]->()
    USING INDEX SEEK s:Entity(tenant_id, id)
  WHERE f.memory_id = $memory_id
  RETURN s, f
  UNION
  WITH 1 AS scan WHERE $subject IS NULL
  MATCH (s:Entity {tenant_id: $tenant})-[f]->()
    USING INDEX SEEK s:Entity(tenant_id)
  WHERE f.memory_id = $memory_id
  RETURN s, f
}
WITH s, f WHERE f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to
OPTIONAL MATCH (ep:Episode {tenant_id: $tenant, id: f.source_episode_id})
  WHERE (ep.visible_to IS NULL OR $principal = '*' OR $principal IN ep.visible_to)
CALL (s, f) {
  OPTIONAL MATCH (s)-[other]->()
  WHERE other.attribute = f.attribute AND other.memory_id <> f.memory_id
    AND (other.visible_to IS NULL OR $principal = '*' OR $principal IN other.visible_to)
  // One order, so the same facts give the same answer on any server (or after a tenant's move).
  WITH other ORDER BY other.recorded_at, other.memory_id
  RETURN collect(CASE WHEN other.memory_id = f.supersedes_memory_id THEN properties(other) END) AS superseded,
         collect(CASE WHEN other.supersedes_memory_id = f.memory_id THEN properties(other) END) AS superseded_by,
         collect(CASE WHEN other.memory_id = f.revises_memory_id THEN properties(other) END) AS revises,
         collect(CASE WHEN other.revises_memory_id = f.memory_id THEN properties(other) END) AS revised_by
}
// The trail quotes its episode: shown only when the episode is.
CALL (f, ep) {
  OPTIONAL MATCH (x:Extraction {tenant_id: $tenant, episode_id: ep.id})
  WHERE f.memory_id IN x.memory_ids
  WITH x ORDER BY x.created_at, x.id
  RETURN collect(properties(x)) AS trail
}
RETURN properties(f) AS fact, properties(ep) AS episode, superseded, superseded_by, revises, revised_by, trail
