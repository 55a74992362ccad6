// name: neighbourhood
// doc: The entities within k relation hops of an entity (either direction), every hop valid at valid_at: each with its distance and one shortest path to it.
// param: tenant string  the tenant id
// param: subject string  the centre entity, e.g. cust-ada
// param: hops int[1..4]  how many relation hops to go out (1 to 4)
// param: valid_at datetime  the instant every hop must be valid at
// param: known_at datetime?  what we believed at this instant; null = now
// param: relations list?  only these relation attributes, e.g. holds,covered_by; null = every relation
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// example: :param tenant => 'demo'
// example: :param subject => 'cust-ada'
// example: :param hops => 2
// example: :param valid_at => datetime()
// example: :param known_at => null
// example: :param relations => null
// example: :param principal => null
// Variable-length bounds cannot be parameters: expand up to 4 hops and keep paths of at most $hops.
MATCH path = (s:Entity {tenant_id: $tenant, id: $subject})-[hops*1..4]-(n:Entity)
  USING INDEX SEEK s:Entity(tenant_id, id)
WHERE size(hops) <= $hops
  AND n <> s
  AND all(h IN hops WHERE
        h.kind = 'relation'
    AND h.tenant_id = $tenant
    AND h.status = 'confirmed'
    AND (h.visible_to IS NULL OR $principal = '*' OR $principal IN h.visible_to)
    AND ($relations IS NULL OR h.attribute IN $relations)
    AND h.valid_from <= $valid_at
    AND (h.valid_to IS NULL OR $valid_at < h.valid_to)
    AND CASE WHEN $known_at IS NULL THEN h.expired_at IS NULL
             ELSE h.recorded_at <= $known_at AND (h.expired_at IS NULL OR $known_at < h.expired_at)
        END)
WITH n, path ORDER BY length(path), [x IN nodes(path) | x.id]
WITH n, collect(path)[0] AS path
RETURN n.id AS entity, n.type AS type, n.name AS name, length(path) AS distance,
       [x IN nodes(path) | x.id] AS via,
       [h IN relationships(path) | h.attribute] AS relations,
       [h IN relationships(path) | properties(h)] AS facts,
       path
ORDER BY distance, entity
