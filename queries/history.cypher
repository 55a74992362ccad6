// name: history
// doc: Every stored version of a subject's facts, retired ones included (or, with current_only, only the ones believed now), with supersession links.
// param: tenant string  the tenant id
// param: subject string  the entity id
// param: attribute string?  one attribute, or null for every attribute; during a schema migration and its dual-read window an old name also answers from the new one
// param: current_only bool?  true = only the rows believed now (expired_at IS NULL): the valid-time versions we hold today; null or false = retired rows too
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// param: memory_types list?  only facts of these memory types (each attribute's memory_type in the schema), e.g. preference,task_state; null = every type
// example: :param tenant => 'demo'
// example: :param subject => 'mira'
// example: :param attribute => 'passport_deadline'
// example: :param current_only => null
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
  AND (NOT coalesce($current_only, false) OR f.expired_at IS NULL)
  AND ($memory_types IS NULL OR f.memory_type IN $memory_types)
  AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
RETURN f.attribute AS attribute, f.value AS value, f.valid_from AS valid_from,
       f.valid_to AS valid_to, f.recorded_at AS recorded_at, f.expired_at AS expired_at,
       f.op AS op, f.source_episode_id AS episode, f.supersedes_memory_id AS supersedes,
       f.memory_id AS memory_id, f {.*, valid_from: toString(f.valid_from), valid_to: toString(f.valid_to), recorded_at: toString(f.recorded_at),
         expired_at: toString(f.expired_at), last_confirmed_at: toString(f.last_confirmed_at)} AS fact
ORDER BY attribute, recorded_at, valid_from
