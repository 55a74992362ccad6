// name: tenant-stats
// doc: One tenant at a glance (counts only, no values): entities, fact rows believed now by status, retired rows, open quarantine entries, episodes by queue status, and the last write (the latest recorded_at or expired_at of a fact row).
// param: tenant string  the tenant id
// example: :param tenant => 'demo'
CALL () {
  MATCH (e:Entity {tenant_id: $tenant})
  RETURN count(e) AS entities
}
CALL () {
  OPTIONAL MATCH (:Entity {tenant_id: $tenant})-[f]->()
  WHERE f.memory_id IS NOT NULL
  WITH f, CASE WHEN f.expired_at IS NULL THEN f.status ELSE 'retired' END AS bucket
  WITH bucket, count(f) AS rows, max(f.recorded_at) AS recorded, max(f.expired_at) AS expired
  ORDER BY bucket
  RETURN collect(CASE WHEN rows > 0 THEN {status: bucket, facts: rows} END) AS facts,
         max(CASE WHEN expired > recorded THEN expired ELSE recorded END) AS last_write
}
CALL () {
  OPTIONAL MATCH (q:Quarantine {tenant_id: $tenant})
  RETURN count(CASE WHEN q.status = 'open' THEN 1 END) AS quarantine_open, count(q) AS quarantine_total
}
CALL () {
  OPTIONAL MATCH (ep:Episode {tenant_id: $tenant})
  WITH coalesce(ep.status, 'recorded') AS status, count(ep) AS episodes
  ORDER BY status
  RETURN collect(CASE WHEN episodes > 0 THEN {status: status, episodes: episodes} END) AS queue
}
// A tenant holding nothing gives no row, so a misspelt tenant is named, not counted as zeros.
WITH * WHERE entities > 0 OR quarantine_total > 0 OR queue <> []
RETURN $tenant AS tenant, entities, coalesce([r IN facts WHERE r.status = 'candidate' | r.facts][0], 0) AS candidates,
       facts, quarantine_open, quarantine_total, queue, last_write
