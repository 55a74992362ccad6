// name: current
// doc: What is true now about a subject: facts valid now and still believed (confirmed only, unless statuses asks for candidates too).
// param: tenant string  the tenant id
// param: subject string  the entity id, e.g. mira
// param: attribute string?  one attribute, or null for every attribute; during a schema migration and its dual-read window an old name also answers from the new one
// param: statuses list?  fact statuses to return: null = confirmed only; confirmed,candidate adds pending candidates
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// param: memory_types list?  only facts of these memory types (each attribute's memory_type in the schema), e.g. preference,task_state; null = every type
// example: :param tenant => 'demo'
// example: :param subject => 'mira'
// example: :param attribute => 'passport_deadline'
// example: :param statuses => null
// example: :param principal => null
// example: :param memory_types => null
// Migration-only keys are read from properties(m): on a store that never migrated, m.aliases
// would make the server (and Browser) warn about an unknown property key on every run.
WITH CASE WHEN $attribute IS NULL THEN [] ELSE COLLECT { MATCH (m:SchemaMigration)
       WHERE m.status <> 'done' OR properties(m).dual_read_until > datetime()
       UNWIND properties(m).aliases AS pair WITH pair WHERE pair STARTS WITH $attribute + '>'
       RETURN substring(pair, size($attribute) + 1) } END AS aliases
MATCH (s:Entity {tenant_id: $tenant, id: $subject})-[f]->(o)
  USING INDEX SEEK s:Entity(tenant_id, id)
WHERE f.memory_id IS NOT NULL
  AND ($attribute IS NULL OR f.attribute = $attribute OR f.attribute IN aliases)
  AND f.expired_at IS NULL
  AND f.status IN coalesce($statuses, ['confirmed'])
  AND ($memory_types IS NULL OR f.memory_type IN $memory_types)
  AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
  AND f.valid_from <= datetime()
  AND (f.valid_to IS NULL OR datetime() < f.valid_to)
RETURN f.attribute AS attribute, f.value AS value, f.valid_from AS valid_from,
       f.valid_to AS valid_to, f.source_episode_id AS episode, f.asserted_by AS asserted_by,
       f.memory_id AS memory_id, f.status AS status, f {.*, valid_from: toString(f.valid_from), valid_to: toString(f.valid_to), recorded_at: toString(f.recorded_at),
         expired_at: toString(f.expired_at), last_confirmed_at: toString(f.last_confirmed_at)} AS fact
ORDER BY attribute, value
