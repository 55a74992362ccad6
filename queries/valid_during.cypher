// name: valid-during
// doc: What was true at some time in the window [valid_from, valid_to), as we believe now (or, with known_at, as we believed then): every version whose valid interval overlaps the window, so a value that changed inside it answers with both. Context assembly reads a period ("in 2024", "last June") with it.
// param: tenant string  the tenant id
// param: subject string  the entity id
// param: attribute string?  one attribute, or null for every attribute
// param: valid_from datetime  start of the window (inclusive)
// param: valid_to datetime  end of the window (exclusive)
// param: known_at datetime?  what we believed at this instant (transaction time); null = now
// param: statuses list?  fact statuses to return: null = confirmed only; confirmed,candidate adds pending candidates
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// param: memory_types list?  only facts of these memory types (each attribute's memory_type in the schema), e.g. preference,task_state; null = every type
// example: :param tenant => 'demo'
// example: :param subject => 'mira'
// example: :param attribute => null
// example: :param valid_from => datetime('2026-06-01T00:00:00Z')
// example: :param valid_to => datetime('2026-07-01T00:00:00Z')
// example: :param known_at => null
// example: :param statuses => null
// example: :param principal => null
// example: :param memory_types => null
MATCH (s:Entity {tenant_id: $tenant, id: $subject})-[f]->(o)
  USING INDEX SEEK s:Entity(tenant_id, id)
WHERE f.memory_id IS NOT NULL
  AND ($attribute IS NULL OR f.attribute = $attribute)
  AND f.status IN coalesce($statuses, ['confirmed'])
  AND ($memory_types IS NULL OR f.memory_type IN $memory_types)
  AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
  AND f.valid_from < $valid_to
  AND (f.valid_to IS NULL OR $valid_from < f.valid_to)
  AND CASE WHEN $known_at IS NULL THEN f.expired_at IS NULL
           ELSE f.recorded_at <= $known_at AND (f.expired_at IS NULL OR $known_at < f.expired_at)
      END
RETURN f.attribute AS attribute, f.value AS value, f.valid_from AS valid_from,
       f.valid_to AS valid_to, f.source_episode_id AS episode, f.asserted_by AS asserted_by,
       f.memory_id AS memory_id, f.status AS status, f {.*, valid_from: toString(f.valid_from), valid_to: toString(f.valid_to), recorded_at: toString(f.recorded_at),
         expired_at: toString(f.expired_at), last_confirmed_at: toString(f.last_confirmed_at)} AS fact
ORDER BY attribute, valid_from, value
