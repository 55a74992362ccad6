// name: queue
// doc: The background queue in a tenant: episodes by status (recorded, pending, claimed, done, failed), the oldest waiting one, and the errors of dead-lettered ones (only of episodes the reader may read: an episode that stated a private value, or is queued with one, is restricted to its readers).
// param: tenant string  the tenant id
// param: principal string?  the reader, e.g. user:mira; null = errors of shared episodes only; '*' = every error (admin)
// example: :param tenant => 'demo'
// example: :param principal => null
MATCH (e:Episode {tenant_id: $tenant})
WITH coalesce(e.status, 'recorded') AS status, e,
     e.visible_to IS NULL OR $principal = '*' OR $principal IN e.visible_to AS readable
ORDER BY e.occurred_at
RETURN status, count(e) AS episodes, min(e.occurred_at) AS oldest, max(e.attempts) AS max_attempts,
       collect(CASE WHEN status = 'failed' AND readable THEN e.id + ': ' + coalesce(e.error, '') END)[..5] AS errors
ORDER BY status
