// name: changes
// doc: What changed in what we believe between two instants (transaction time, [since, until)): fact rows recorded or retired in the window, for a tenant, optionally one subject and one attribute.
// param: tenant string  the tenant id
// param: since datetime  start of the window (inclusive)
// param: until datetime  end of the window (exclusive)
// param: subject string?  one entity, or null for every subject
// param: attribute string?  one attribute, or null for every attribute
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// param: memory_types list?  only facts of these memory types (each attribute's memory_type in the schema), e.g. preference,task_state; null = every type
// example: :param tenant => 'demo'
// example: :param since => datetime('2026-01-01T00:00:00Z')
// example: :param until => datetime() + duration('PT1M')
// example: :param subject => null
// example: :param attribute => null
// example: :param principal => null
// example: :param memory_types => null
MATCH (s:Entity {tenant_id: $tenant})-[f]->()
WHERE f.memory_id IS NOT NULL
  AND ($subject IS NULL OR s.id = $subject)
  AND ($attribute IS NULL OR f.attribute = $attribute)
  AND ($memory_types IS NULL OR f.memory_type IN $memory_types)
  AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
  AND ((f.recorded_at >= $since AND f.recorded_at < $until)
       OR (f.expired_at >= $since AND f.expired_at < $until))
UNWIND [e IN [{change: 'recorded', at: f.recorded_at}, {change: 'retired', at: f.expired_at}]
        WHERE e.at IS NOT NULL AND $since <= e.at AND e.at < $until] AS event
RETURN event.at AS at, event.change AS change, s.id AS subject, f.attribute AS attribute,
       f.value AS value, f.valid_from AS valid_from, f.valid_to AS valid_to, f.op AS op,
       f.source_episode_id AS episode, f.asserted_by AS asserted_by, f.memory_id AS memory_id,
       f.supersedes_memory_id AS supersedes, f.revises_memory_id AS revises,
       f {.*, valid_from: toString(f.valid_from), valid_to: toString(f.valid_to), recorded_at: toString(f.recorded_at),
         expired_at: toString(f.expired_at), last_confirmed_at: toString(f.last_confirmed_at)} AS fact
ORDER BY at, subject, attribute, change DESC, valid_from
