// name: quarantine
// doc: Quarantine contents: candidates the write path refused, with the reason, the stage that refused them (extract, validate, write) and the episode they came from (and the line, for deltas `sgam replay` recorded as refused), newest first. A candidate of a private attribute is listed only to that attribute's readers, an extract-stage entry (the extractor's raw reading) only to the readers of its episode.
// param: tenant string  the tenant id
// param: episode string?  one source episode id, or null for every episode
// param: since datetime?  only entries created at or after this instant; null = all
// param: status string?  open (not written yet) or resolved (written by a replay); null = both
// param: principal string?  the reader, e.g. user:mira; null = shared entries only; '*' = every entry (admin)
// example: :param tenant => 'demo'
// example: :param episode => null
// example: :param since => null
// example: :param status => 'open'
// example: :param principal => null
MATCH (q:Quarantine {tenant_id: $tenant})
WHERE ($episode IS NULL OR q.episode_id = $episode)
  AND ($since IS NULL OR q.created_at >= $since)
  AND ($status IS NULL OR q.status = $status)
OPTIONAL MATCH (ep:Episode {tenant_id: $tenant, id: q.episode_id})
WITH q, CASE WHEN q.stage = 'extract' THEN ep.visible_to ELSE q.visible_to END AS readers
WHERE readers IS NULL OR $principal = '*' OR $principal IN readers
RETURN q.id AS id, q.created_at AS created_at, q.status AS status, q.episode_id AS episode,
       q.extractor AS extractor, q.stage AS stage, q.reason AS reason, q.error AS error,
       q.candidate AS candidate, q.attempts AS attempts, q.resolved_at AS resolved_at,
       q.line AS line, readers
ORDER BY created_at DESC, id
