// name: doctor
// doc: Invariant violations in a tenant: overlapping confirmed versions of a single-valued attribute believed at the same time (pending candidates may overlap), empty or inverted valid intervals, rows retired before they were recorded (expired_at < recorded_at: a writer's clock ran behind the row it retired), facts whose source episode is gone, edges that cross tenants.
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
}
RETURN problem, subject, attribute, memory_id, other
ORDER BY problem, subject, attribute
