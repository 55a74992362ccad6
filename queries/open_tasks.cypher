// name: open-tasks
// doc: Project memory: tasks open at valid_at (status not done or cancelled), by project, with their status, owner and due date then, soonest due first.
// param: tenant string  the tenant id
// param: project string?  one project id, or null for every project
// param: valid_at datetime?  the instant the tasks must be open at; null = now
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// example: :param tenant => 'demo-project'
// example: :param project => 'sgam'
// example: :param valid_at => null
// example: :param principal => null
// Types and attributes are matched as properties (t.type, f.attribute), not labels, so a database
// without project memory answers nothing instead of warning about unknown labels.
WITH coalesce($valid_at, datetime()) AS at
MATCH (t:Entity {tenant_id: $tenant})-[p]->(proj:Entity)
WHERE t.type = 'Task' AND p.attribute = 'part_of'
  AND ($project IS NULL OR proj.id = $project)
MATCH (t)-[s]->(:Value)
WHERE s.attribute = 'task_status' AND NOT s.value IN ['done', 'cancelled']
  AND all(f IN [p, s] WHERE f.expired_at IS NULL AND f.status = 'confirmed'
    AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
    AND f.valid_from <= at AND (f.valid_to IS NULL OR at < f.valid_to))
CALL (t, at) {
  OPTIONAL MATCH (t)-[f]->(:Value)
  WHERE f.attribute IN ['owner', 'due'] AND f.expired_at IS NULL AND f.status = 'confirmed'
    AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
    AND f.valid_from <= at AND (f.valid_to IS NULL OR at < f.valid_to)
  WITH collect(f) AS held
  RETURN [f IN held WHERE f.attribute = 'owner' | f.value][0] AS owner,
         [f IN held WHERE f.attribute = 'due' | f.value][0] AS due
}
RETURN proj.id AS project, proj.name AS project_name, t.id AS task, t.name AS title, s.value AS status,
       owner, due, s.valid_from AS status_since, s.source_episode_id AS episode, s.asserted_by AS asserted_by
ORDER BY project, due IS NULL, due, task
