// name: residue
// doc: What is left of a subject anywhere in a tenant, over every label and relationship type (empty after forget_subject).
// param: tenant string  the tenant id
// param: subject string  the entity id that was forgotten
// example: :param tenant => 'demo'
// example: :param subject => 'mira'
CALL () {
  MATCH (n) WHERE n.tenant_id = $tenant AND NOT n:Tombstone
    AND (n.id = $subject OR n.subject = $subject OR n.key STARTS WITH $subject + '|'
         OR $subject IN coalesce(n.subjects, []))
  RETURN 'node ' + labels(n)[0] AS kind, count(n) AS n
  UNION ALL
  MATCH ()-[r]->() WHERE r.tenant_id = $tenant AND (r.subject = $subject OR r.value = $subject)
  RETURN 'fact ' + type(r) AS kind, count(r) AS n
}
WITH kind, n WHERE n > 0
RETURN kind, n
ORDER BY kind
