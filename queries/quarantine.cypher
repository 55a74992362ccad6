// name: quarantine
// doc: Quarantine contents: candidates the write path refused, with the reason and the episode they came from, newest first.
// param: tenant string  the tenant id
// param: episode string?  one source episode id, or null for every episode
// param: since datetime?  only entries created at or after this instant; null = all
// example: :param {tenant: 'demo', episode: null, since: null}
MATCH (q:Quarantine {tenant_id: $tenant})
WHERE ($episode IS NULL OR q.episode_id = $episode)
  AND ($since IS NULL OR q.created_at >= $since)
RETURN q.id AS id, q.created_at AS created_at, q.episode_id AS episode, q.reason AS reason,
       q.candidate AS candidate
ORDER BY created_at DESC, id
