// name: queue
// doc: The background queue in a tenant: episodes by status (recorded, pending, claimed, done, failed), the oldest waiting one, and the errors of dead-lettered ones.
// param: tenant string  the tenant id
// example: :param tenant => 'demo'
MATCH (e:Episode {tenant_id: $tenant})
WITH coalesce(e.status, 'recorded') AS status, e
ORDER BY e.occurred_at
RETURN status, count(e) AS episodes, min(e.occurred_at) AS oldest, max(e.attempts) AS max_attempts,
       collect(CASE WHEN status = 'failed' THEN e.id + ': ' + coalesce(e.error, '') END)[..5] AS errors
ORDER BY status
