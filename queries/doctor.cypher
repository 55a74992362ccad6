// name: doctor
// doc: Invariant violations in a tenant: overlapping confirmed versions of a single-valued attribute believed at the same time (pending candidates may overlap), empty or inverted valid intervals, rows retired before they were recorded (expired_at < recorded_at: a writer's clock ran behind the row it retired), facts whose source episode is gone, edges that cross tenants; and what a recorded deletion must not leave (graph/deletion.py): a fact citing a deleted episode, a row of a deleted memory, a ledger statement of a deleted memory or episode, an orphan value node of a slot a deletion touched, data of a deleted tenant, a tenant deletion that stopped halfway; an alias that names no entity (graph/aliases.py).
// param: tenant string  the tenant id
// param: single_valued list  the attributes with cardinality one (the schema knows them)
// example: :param tenant => 'demo'
// example: :param single_valued => ['passport_deadline', 'home_city', 'covered_by']
CALL () {
  MATCH (s:Entity {tenant_id: $tenant})-[f]->()
  WHERE f.memory_id IS NOT NULL AND f.attribute IN $single_valued AND f.status = 'confirmed'
  MATCH (s)-[g]->()
  WHERE g.attribute = f.attribute AND g.memory_id > f.memory_id AND g.status = 'confirmed'
    AND f.valid_from < coalesce(g.valid_to, datetime('9999-12-31T00:00:00Z'))
    AND g.valid_from < coalesce(f.valid_to, datetime('9999-12-31T00:00:00Z'))
    AND f.recorded_at < coalesce(g.expired_at, datetime('9999-12-31T00:00:00Z'))
    AND g.recorded_at < coalesce(f.expired_at, datetime('9999-12-31T00:00:00Z'))
  RETURN 'overlapping believed versions' AS problem, s.id AS subject, f.attribute AS attribute,
         f.memory_id AS memory_id, g.memory_id AS other
  UNION ALL
  MATCH (s:Entity {tenant_id: $tenant})-[f]->()
  WHERE f.memory_id IS NOT NULL AND f.valid_to IS NOT NULL AND f.valid_to <= f.valid_from
  RETURN 'valid_to not after valid_from' AS problem, s.id AS subject, f.attribute AS attribute,
         f.memory_id AS memory_id, null AS other
  UNION ALL
  MATCH (s:Entity {tenant_id: $tenant})-[f]->()
  WHERE f.memory_id IS NOT NULL AND f.expired_at < f.recorded_at
  RETURN 'expired before recorded' AS problem, s.id AS subject, f.attribute AS attribute,
         f.memory_id AS memory_id, null AS other
  UNION ALL
  MATCH (s:Entity {tenant_id: $tenant})-[f]->()
  WHERE f.memory_id IS NOT NULL
    AND NOT EXISTS { MATCH (:Episode {tenant_id: $tenant, id: f.source_episode_id}) }
  RETURN 'source episode missing' AS problem, s.id AS subject, f.attribute AS attribute,
         f.memory_id AS memory_id, f.source_episode_id AS other
  UNION ALL
  MATCH (a)-[r]-(b)
  WHERE a.tenant_id = $tenant
    AND (coalesce(b.tenant_id, '') <> $tenant OR coalesce(r.tenant_id, $tenant) <> $tenant)
  RETURN DISTINCT 'cross-tenant edge' AS problem, a.id AS subject, type(r) AS attribute,
         r.memory_id AS memory_id, coalesce(b.tenant_id, r.tenant_id) AS other
  UNION ALL
  // Deletion records (graph/deletion.py) name what went: nothing may still cite or hold it. An
  // episode recorded again under a deleted id is a new episode, so only missing ones count.
  MATCH (d:Deletion {tenant_id: $tenant})
  WHERE d.target_episode_id IS NOT NULL
    AND NOT EXISTS { MATCH (:Episode {tenant_id: $tenant, id: d.target_episode_id}) }
  WITH collect(d.target_episode_id) AS gone WHERE gone <> []
  MATCH (s:Entity {tenant_id: $tenant})-[f]->()
  WHERE f.memory_id IS NOT NULL
  UNWIND [f.source_episode_id, f.expired_by_episode_id, f.confirmed_by_episode_id]
         + coalesce(f.support_episodes, []) AS cited
  WITH s, f, cited WHERE cited IN gone
  RETURN DISTINCT 'fact cites a deleted episode' AS problem, s.id AS subject, f.attribute AS attribute,
         f.memory_id AS memory_id, cited AS other
  UNION ALL
  MATCH (d:Deletion {tenant_id: $tenant})
  UNWIND coalesce(d.memory_ids, []) AS m
  WITH collect(m) AS gone WHERE gone <> []
  MATCH (s:Entity {tenant_id: $tenant})-[f]->()
  WHERE f.memory_id IN gone
  RETURN 'fact of a deleted memory' AS problem, s.id AS subject, f.attribute AS attribute,
         f.memory_id AS memory_id, null AS other
  UNION ALL
  MATCH (d:Deletion {tenant_id: $tenant})
  WITH d, [k IN coalesce(d.statement_keys, []) | '"' + k + '"']
          + [m IN coalesce(d.memory_ids, []) | '"row:' + m + '"']
          + [m IN coalesce(d.memory_ids, []) | '"row-end:' + m + '"'] AS needles,
       CASE WHEN d.target_episode_id IS NULL
              OR EXISTS { MATCH (:Episode {tenant_id: $tenant, id: d.target_episode_id}) } THEN null
            ELSE '.*("ep":"' + replace(d.target_episode_id, '.', '\\.') + '"|"eps":\\[[^\\]]*"'
                 + replace(d.target_episode_id, '.', '\\.') + '").*' END AS pattern
  MATCH (l:Ledger {tenant_id: $tenant})
  WHERE any(p IN l.points WHERE any(n IN needles WHERE p CONTAINS n) OR p =~ pattern)
  RETURN DISTINCT 'ledger holds a deleted statement' AS problem, l.subject AS subject,
         l.attribute AS attribute, null AS memory_id, d.id AS other
  UNION ALL
  MATCH (d:Deletion {tenant_id: $tenant})
  UNWIND coalesce(d.slots, []) AS slot
  WITH DISTINCT slot
  MATCH (v:Value {tenant_id: $tenant})
  WHERE v.key STARTS WITH slot + '|' AND NOT EXISTS { MATCH ()-[]->(v) }
  RETURN 'orphan value node' AS problem, split(slot, '|')[0] AS subject, split(slot, '|')[1] AS attribute,
         null AS memory_id, elementId(v) AS other
  UNION ALL
  MATCH (d:Deletion {tenant_id: $tenant, grain: 'tenant'})
  WITH max(d.deleted_at) AS at WHERE at IS NOT NULL
  MATCH (n) WHERE n.tenant_id = $tenant AND NOT n:Deletion
    AND coalesce(n.recorded_at, n.created_at, n.started_at, n.forgotten_at, n.at, n.updated_at) < at
  RETURN 'left by a tenant deletion' AS problem, coalesce(n.id, n.subject) AS subject,
         labels(n)[0] AS attribute, null AS memory_id, toString(at) AS other
  UNION ALL
  MATCH (d:Deletion {tenant_id: $tenant, grain: 'tenant', status: 'deleting'})
  RETURN 'tenant deletion stopped halfway' AS problem, null AS subject, null AS attribute,
         null AS memory_id, d.id AS other
  UNION ALL
  MATCH (a:Alias {tenant_id: $tenant})
  WHERE NOT EXISTS { MATCH (a)-[:ALIAS_OF]->(:Entity {tenant_id: $tenant}) }
  RETURN 'orphan alias' AS problem, null AS subject, null AS attribute, null AS memory_id, a.name AS other
}
RETURN problem, subject, attribute, memory_id, other
ORDER BY problem, subject, attribute
