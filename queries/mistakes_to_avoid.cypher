// name: mistakes-to-avoid
// doc: Project memory: mistakes recorded for a project and the lesson drawn from each (what happened, what to do instead), newest first.
// param: tenant string  the tenant id
// param: project string?  one project id, or null for every project
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// example: :param tenant => 'demo-project'
// example: :param project => 'sgam'
// example: :param principal => null
MATCH (m:Entity {tenant_id: $tenant})-[p]->(proj:Entity)
WHERE m.type = 'Mistake' AND p.attribute = 'part_of' AND p.expired_at IS NULL AND p.status = 'confirmed'
  AND (p.visible_to IS NULL OR $principal = '*' OR $principal IN p.visible_to)
  AND ($project IS NULL OR proj.id = $project)
CALL (m) {
  OPTIONAL MATCH (m)-[f]->(:Value)
  WHERE f.attribute IN ['what_happened', 'lesson'] AND f.expired_at IS NULL AND f.status = 'confirmed'
    AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
    AND f.valid_from <= datetime() AND (f.valid_to IS NULL OR datetime() < f.valid_to)
  WITH collect(f) AS held
  RETURN [f IN held WHERE f.attribute = 'what_happened' | f.value][0] AS what_happened,
         [f IN held WHERE f.attribute = 'lesson' | f.value][0] AS lesson
}
RETURN proj.id AS project, m.id AS mistake, m.name AS title, what_happened, lesson,
       p.valid_from AS happened_at, p.source_episode_id AS episode, p.asserted_by AS asserted_by
ORDER BY project, happened_at DESC, mistake
