// name: low-confidence
// doc: Facts believed now (any validity, any status) whose confidence is below a threshold, least confident first.
// param: tenant string  the tenant id
// param: threshold float[0..1]  report facts with confidence strictly below this
// param: subject string?  one entity, or null for every subject
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// param: memory_types list?  only facts of these memory types (each attribute's memory_type in the schema), e.g. preference,task_state; null = every type
// example: :param tenant => 'demo'
// example: :param threshold => 0.5
// example: :param subject => null
// example: :param principal => null
// example: :param memory_types => null
MATCH (s:Entity {tenant_id: $tenant})-[f]->()
WHERE f.memory_id IS NOT NULL
  AND f.expired_at IS NULL
  AND ($subject IS NULL OR s.id = $subject)
  AND ($memory_types IS NULL OR f.memory_type IN $memory_types)
  AND f.confidence < $threshold
  AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
RETURN s.id AS subject, f.attribute AS attribute, f.value AS value, f.confidence AS confidence,
       f.status AS status, f.valid_from AS valid_from, f.valid_to AS valid_to,
       f.source_episode_id AS episode, f.asserted_by AS asserted_by, f.memory_id AS memory_id,
       f {.*, valid_from: toString(f.valid_from), valid_to: toString(f.valid_to), recorded_at: toString(f.recorded_at),
         expired_at: toString(f.expired_at), last_confirmed_at: toString(f.last_confirmed_at)} AS fact
ORDER BY confidence, subject, attribute, valid_from
