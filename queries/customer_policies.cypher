// name: customer-policies
// doc: Customer -> account -> policy at valid_at: the accounts each customer held and the policy covering each, both hops valid at that instant, with the policy's plan then. Facts are matched by attribute name, never by relationship type, so a rename_relation migration (holds stored as OWNS) changes nothing.
// param: tenant string  the tenant id
// param: customer string?  one customer id, or null for every customer
// param: valid_at datetime  the instant both hops must be valid at
// param: known_at datetime?  what we believed at this instant; null = now
// param: relations list?  the customer->account and account->policy relation attributes, in that order; null = holds,covered_by
// param: plan_attribute string?  the policy attribute shown as plan; null = plan
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// example: :param tenant => 'demo'
// example: :param customer => 'cust-ada'
// example: :param valid_at => datetime('2026-02-01T00:00:00Z')
// example: :param known_at => null
// example: :param relations => null
// example: :param plan_attribute => null
// example: :param principal => null
WITH coalesce($relations, ['holds', 'covered_by']) AS via
MATCH (c:Customer {tenant_id: $tenant})-[h]->(a:Account)-[k]->(p:Policy)
WHERE ($customer IS NULL OR c.id = $customer)
  AND h.attribute = via[0] AND k.attribute = via[1]
  AND all(f IN [h, k] WHERE
        f.status = 'confirmed'
    AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
    AND f.valid_from <= $valid_at
    AND (f.valid_to IS NULL OR $valid_at < f.valid_to)
    AND CASE WHEN $known_at IS NULL THEN f.expired_at IS NULL
             ELSE f.recorded_at <= $known_at AND (f.expired_at IS NULL OR $known_at < f.expired_at)
        END)
CALL (p) {
  OPTIONAL MATCH (p)-[pl]->(:Value)
  WHERE pl.attribute = coalesce($plan_attribute, 'plan') AND pl.status = 'confirmed'
    AND (pl.visible_to IS NULL OR $principal = '*' OR $principal IN pl.visible_to)
    AND pl.valid_from <= $valid_at AND (pl.valid_to IS NULL OR $valid_at < pl.valid_to)
    AND CASE WHEN $known_at IS NULL THEN pl.expired_at IS NULL
             ELSE pl.recorded_at <= $known_at AND (pl.expired_at IS NULL OR $known_at < pl.expired_at)
        END
  RETURN pl.value AS plan
  LIMIT 1
}
RETURN c.id AS customer, c.name AS customer_name, a.id AS account, p.id AS policy, plan,
       h.valid_from AS holds_from, h.valid_to AS holds_to, k.valid_from AS covered_from,
       k.valid_to AS covered_to, [h.source_episode_id, k.source_episode_id] AS episodes,
       [h.memory_id, k.memory_id] AS memory_ids,
       [properties(h), properties(k)] AS facts
ORDER BY customer, account, policy
