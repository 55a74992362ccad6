// name: episode-facts
// doc: What given episodes stated: every fact row they sourced or supported (retired rows included) about the entities they mention, each with the versions believed now that hold at valid_at in the same slot; context assembly labels an old episode as history from it.
// param: tenant string  the tenant id
// param: episodes list  the episode ids, e.g. e1,e2
// param: valid_at datetime  the instant the holding versions must be valid at
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// example: :param tenant => 'demo'
// example: :param episodes => ['e1', 'e2']
// example: :param valid_at => datetime()
// example: :param principal => null
UNWIND $episodes AS eid
MATCH (ep:Episode {tenant_id: $tenant, id: eid})-[:MENTIONS]->(s:Entity)
WHERE (ep.visible_to IS NULL OR $principal = '*' OR $principal IN ep.visible_to)
MATCH (s)-[f]->()
WHERE f.memory_id IS NOT NULL AND f.tenant_id = $tenant
  AND (f.source_episode_id = eid OR eid IN coalesce(f.support_episodes, []))
  AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
CALL (s, f) {
  OPTIONAL MATCH (s)-[g]->()
  WHERE g.memory_id IS NOT NULL AND g.attribute = f.attribute AND g.status = 'confirmed'
    AND g.expired_at IS NULL AND g.valid_from <= $valid_at
    AND (g.visible_to IS NULL OR $principal = '*' OR $principal IN g.visible_to)
    AND (g.valid_to IS NULL OR $valid_at < g.valid_to)
  RETURN collect(g {.*, valid_from: toString(g.valid_from), valid_to: toString(g.valid_to),
                    recorded_at: toString(g.recorded_at), expired_at: toString(g.expired_at),
                    last_confirmed_at: toString(g.last_confirmed_at),
                    value: CASE WHEN g.value_type IN ['date', 'datetime'] THEN toString(g.value) ELSE g.value END})
         AS holding
}
RETURN eid AS episode, f {.*, valid_from: toString(f.valid_from), valid_to: toString(f.valid_to),
                         recorded_at: toString(f.recorded_at), expired_at: toString(f.expired_at),
                         last_confirmed_at: toString(f.last_confirmed_at),
                         value: CASE WHEN f.value_type IN ['date', 'datetime'] THEN toString(f.value) ELSE f.value END}
         AS fact, holding
ORDER BY episode, fact.attribute, fact.valid_from
