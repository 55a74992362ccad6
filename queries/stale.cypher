// name: stale
// doc: Stale beliefs: facts believed now and valid now whose last confirmation is more than the given number of days old (status candidate for the stale candidates, null for every status), oldest first.
// param: tenant string  the tenant id
// param: days int[0..]  how many days without a confirmation make a fact stale
// param: status string?  candidate or confirmed; null = every status
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// param: memory_types list?  only facts of these memory types (each attribute's memory_type in the schema), e.g. preference,task_state; null = every type
// example: :param tenant => 'demo'
// example: :param days => 30
// example: :param status => null
// example: :param principal => null
// example: :param memory_types => null
MATCH (s:Entity {tenant_id: $tenant})-[f]->()
WHERE f.memory_id IS NOT NULL
  AND f.expired_at IS NULL
  AND ($status IS NULL OR f.status = $status)
  AND ($memory_types IS NULL OR f.memory_type IN $memory_types)
  AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
  AND f.valid_from <= datetime()
  AND (f.valid_to IS NULL OR datetime() < f.valid_to)
  AND coalesce(f.last_confirmed_at, f.recorded_at) < datetime() - duration({days: $days})
WITH s, f, coalesce(f.last_confirmed_at, f.recorded_at) AS confirmed
RETURN s.id AS subject, f.attribute AS attribute, f.value AS value, f.status AS status,
       confirmed AS last_confirmed_at, duration.inDays(confirmed, datetime()).days AS days_since,
       f.support_count AS support_count, f.confidence AS confidence, f.source_episode_id AS episode,
       f.memory_id AS memory_id,
       f {.*, valid_from: toString(f.valid_from), valid_to: toString(f.valid_to), recorded_at: toString(f.recorded_at),
         expired_at: toString(f.expired_at), last_confirmed_at: toString(f.last_confirmed_at)} AS fact
ORDER BY last_confirmed_at, subject, attribute
