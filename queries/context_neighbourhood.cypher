// name: context-neighbourhood
// doc: Supplementary evidence around anchor entities, for context assembly: the latest episodes that mention each anchor (occurred by valid_at, not redacted), and the facts valid at valid_at and believed now that touch the entities within two relation hops of it (each hop valid at valid_at).
// param: tenant string  the tenant id
// param: subjects list  the anchor entity ids, e.g. mira,cust-ada
// param: valid_at datetime  the instant every hop and fact must be valid at
// param: limit int[1..500]  at most this many episodes and this many neighbour entities per anchor
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// param: memory_types list?  only facts of these memory types (each attribute's memory_type in the schema), e.g. preference,task_state; null = every type
// example: :param tenant => 'demo'
// example: :param subjects => ['cust-ada']
// example: :param valid_at => datetime()
// example: :param limit => 10
// example: :param principal => null
// example: :param memory_types => null
UNWIND $subjects AS subject
MATCH (s:Entity {tenant_id: $tenant, id: subject})
  USING INDEX SEEK s:Entity(tenant_id, id)
CALL (s) {
  MATCH (ep:Episode)-[:MENTIONS]->(s)
  WHERE ep.tenant_id = $tenant AND ep.occurred_at <= $valid_at AND ep.redacted_at IS NULL
    AND (ep.visible_to IS NULL OR $principal = '*' OR $principal IN ep.visible_to)
  WITH ep ORDER BY ep.occurred_at DESC LIMIT $limit
  RETURN 'episode' AS kind, 0 AS distance,
         ep {.id, .content, .actor, .kind, occurred_at: toString(ep.occurred_at)} AS episode, null AS fact
  UNION ALL
  MATCH (s) (()-[h WHERE h.kind = 'relation' AND h.tenant_id = $tenant AND h.status = 'confirmed'
                       AND (h.visible_to IS NULL OR $principal = '*' OR $principal IN h.visible_to)
                       AND h.expired_at IS NULL AND h.valid_from <= $valid_at
                       AND (h.valid_to IS NULL OR $valid_at < h.valid_to)]-()){1,2} (n:Entity)
  WHERE n <> s
  WITH n, min(size(h)) AS distance
  ORDER BY distance, n.id LIMIT $limit
  MATCH (n)-[f]-()
  WHERE f.memory_id IS NOT NULL AND f.tenant_id = $tenant AND f.status = 'confirmed'
    AND f.expired_at IS NULL AND f.valid_from <= $valid_at
    AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
    AND (f.valid_to IS NULL OR $valid_at < f.valid_to)
    AND ($memory_types IS NULL OR f.memory_type IN $memory_types)
  RETURN 'fact' AS kind, distance, null AS episode,
         f {.*, valid_from: toString(f.valid_from), valid_to: toString(f.valid_to),
            recorded_at: toString(f.recorded_at), expired_at: toString(f.expired_at),
            last_confirmed_at: toString(f.last_confirmed_at),
            value: CASE WHEN f.value_type IN ['date', 'datetime'] THEN toString(f.value) ELSE f.value END} AS fact
}
RETURN s.id AS anchor, kind, distance, episode, fact
ORDER BY anchor, kind, distance
