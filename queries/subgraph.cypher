// name: subgraph
// doc: A point-in-time subgraph (what sgam export and to_networkx draw): every fact valid at valid_at and believed at known_at, among the given subjects and the entities within hops relation hops of them, or across the whole tenant.
// param: tenant string  the tenant id
// param: valid_at datetime  the instant every fact must be valid at
// param: known_at datetime?  what we believed at this instant; null = now
// param: subjects list?  the entity ids to start from; null = the whole tenant
// param: hops int[0..4]  with subjects: how many relation hops (either direction, valid at valid_at) to widen by
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// example: :param tenant => 'demo'
// example: :param valid_at => datetime()
// example: :param known_at => null
// example: :param subjects => ['cust-ada']
// example: :param hops => 2
// example: :param principal => null
// The entity set: the subjects and their neighbourhood, or (no subjects) every entity of the tenant.
CALL () {
  MATCH (e:Entity {tenant_id: $tenant})
  WHERE $subjects IS NULL OR e.id IN $subjects
  CALL (e) {
    WITH e WHERE $subjects IS NOT NULL AND $hops > 0
    MATCH (e)-[hops*1..4]-(n:Entity)
    WHERE size(hops) <= $hops
      AND all(h IN hops WHERE
            h.kind = 'relation'
        AND h.tenant_id = $tenant
        AND (h.visible_to IS NULL OR $principal = '*' OR $principal IN h.visible_to)
        AND h.valid_from <= $valid_at
        AND (h.valid_to IS NULL OR $valid_at < h.valid_to)
        AND CASE WHEN $known_at IS NULL THEN h.expired_at IS NULL
                 ELSE h.recorded_at <= $known_at AND (h.expired_at IS NULL OR $known_at < h.expired_at)
            END)
    RETURN collect(DISTINCT n) AS near
  }
  UNWIND [e] + near AS entity
  RETURN collect(DISTINCT entity) AS entities
}
// The facts of those entities valid at valid_at: attribute facts, and relation facts inside the set.
UNWIND entities AS subject
OPTIONAL MATCH (subject)-[fact]->(object)
WHERE fact.memory_id IS NOT NULL
  AND fact.tenant_id = $tenant
  AND (fact.visible_to IS NULL OR $principal = '*' OR $principal IN fact.visible_to)
  AND (fact.kind = 'attribute' OR object IN entities)
  AND fact.valid_from <= $valid_at
  AND (fact.valid_to IS NULL OR $valid_at < fact.valid_to)
  AND CASE WHEN $known_at IS NULL THEN fact.expired_at IS NULL
           ELSE fact.recorded_at <= $known_at AND (fact.expired_at IS NULL OR $known_at < fact.expired_at)
      END
WITH subject, fact, object
WHERE fact IS NOT NULL OR $subjects IS NOT NULL
RETURN subject, fact, object
ORDER BY subject.id, fact.attribute, fact.valid_from
