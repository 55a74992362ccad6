// name: decisions-superseded
// doc: Project memory: decisions that replaced an earlier one, with the reason (the new decision's rationale), both summaries and when, oldest first.
// param: tenant string  the tenant id
// param: project string?  only decisions this project took; null = every project
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// example: :param tenant => 'demo-project'
// example: :param project => 'sgam'
// example: :param principal => null
// Supersession is history, not state: a replacement believed now is listed whatever its validity.
MATCH (d:Entity {tenant_id: $tenant})-[s]->(old:Entity)
WHERE s.attribute = 'supersedes' AND s.expired_at IS NULL AND s.status = 'confirmed'
  AND (s.visible_to IS NULL OR $principal = '*' OR $principal IN s.visible_to)
  AND ($project IS NULL OR EXISTS {
        MATCH (:Entity {tenant_id: $tenant, id: $project})-[x]->(d)
        WHERE x.attribute = 'decided' AND x.expired_at IS NULL AND x.status = 'confirmed' })
CALL (d, old) {
  UNWIND [d, old] AS n
  OPTIONAL MATCH (n)-[f]->(:Value)
  WHERE f.attribute IN ['decision_summary', 'rationale']
    AND f.expired_at IS NULL AND f.status = 'confirmed'
    AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
    AND f.valid_from <= datetime() AND (f.valid_to IS NULL OR datetime() < f.valid_to)
  WITH collect({of: n.id, attribute: f.attribute, value: f.value}) AS held
  RETURN [h IN held WHERE h.of = d.id AND h.attribute = 'decision_summary' | h.value][0] AS summary,
         [h IN held WHERE h.of = d.id AND h.attribute = 'rationale' | h.value][0] AS reason,
         [h IN held WHERE h.of = old.id AND h.attribute = 'decision_summary' | h.value][0] AS superseded_summary
}
RETURN d.id AS decision, d.name AS title, summary, reason, old.id AS superseded, old.name AS superseded_title,
       superseded_summary, s.valid_from AS since, s.source_episode_id AS episode, s.asserted_by AS asserted_by
ORDER BY since, decision
