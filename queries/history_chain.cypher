// name: history-chain
// doc: The supersession chain of one attribute: every stored version, retired ones included, with the versions it superseded and revised, the ones that superseded and revised it, and its lineage back to the first statement.
// param: tenant string  the tenant id
// param: subject string  the entity id
// param: attribute string  the attribute (or relation), e.g. passport_deadline
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// example: :param tenant => 'demo'
// example: :param subject => 'mira'
// example: :param attribute => 'passport_deadline'
// example: :param principal => null
MATCH (s:Entity {tenant_id: $tenant, id: $subject})-[f]->()
  USING INDEX SEEK s:Entity(tenant_id, id)
WHERE f.memory_id IS NOT NULL AND f.attribute = $attribute
  AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
WITH collect(f {.*}) AS rows
UNWIND rows AS f
// lineage: follow supersedes_memory_id (the version this one replaced), else revises_memory_id
// (the earlier row this one is a closed, trimmed or merged copy of), back to the first row
WITH rows, f, reduce(chain = [f.memory_id], step IN rows |
       chain + [r IN rows WHERE r.memory_id IN
                  [x IN rows WHERE x.memory_id = last(chain) | coalesce(x.supersedes_memory_id, x.revises_memory_id)]
                | r.memory_id]) AS chain
RETURN f.value AS value, f.valid_from AS valid_from, f.valid_to AS valid_to,
       f.recorded_at AS recorded_at, f.expired_at AS expired_at, f.expired_at IS NULL AS believed,
       f.op AS op, f.source_episode_id AS episode, f.memory_id AS memory_id,
       f.supersedes_memory_id AS supersedes,
       [r IN rows WHERE r.supersedes_memory_id = f.memory_id | r.memory_id] AS superseded_by,
       f.revises_memory_id AS revises,
       [r IN rows WHERE r.revises_memory_id = f.memory_id | r.memory_id] AS revised_by,
       chain,
       [id IN chain | head([r IN rows WHERE r.memory_id = id | r.value])] AS chain_values,
       f {.*, valid_from: toString(f.valid_from), valid_to: toString(f.valid_to), recorded_at: toString(f.recorded_at),
         expired_at: toString(f.expired_at), last_confirmed_at: toString(f.last_confirmed_at)} AS fact
ORDER BY valid_from, recorded_at, believed, memory_id
