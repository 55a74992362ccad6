// name: picture
// doc: A subject's confirmed facts for Neo4j Browser, each drawn by its state at valid_at as believed at known_at: CURRENT (valid then, believed then), PAST (its valid window ended), FUTURE (it starts later), RETIRED (no longer believed: corrected or superseded). Each fact is an APOC virtual relationship of that type, so the SGAM style colours it by state and captions it with its valid interval; needs APOC core (apoc.create.vRelationship).
// param: tenant string  the tenant id
// param: subject string  the entity id
// param: valid_at datetime?  the instant the states are read at (valid time); null = now
// param: known_at datetime?  what we believed at this instant (transaction time); null = now. Rows recorded after it are left out
// param: principal string?  the reader, e.g. user:mira; null = shared facts only; '*' = every fact (admin)
// example: :param tenant => 'demo'
// example: :param subject => 'mira'
// example: :param valid_at => null
// example: :param known_at => null
// example: :param principal => null
// The states follow docs/temporal-semantics.md: believed at K is recorded_at <= K < expired_at,
// valid at T is valid_from <= T < valid_to. Not believed at K (retired) outranks the valid window.
WITH coalesce($valid_at, datetime()) AS t, coalesce($known_at, datetime()) AS k
MATCH (s:Entity {tenant_id: $tenant, id: $subject})-[f]->(o)
  USING INDEX SEEK s:Entity(tenant_id, id)
WHERE f.memory_id IS NOT NULL AND f.status = 'confirmed' AND f.recorded_at <= k
  AND (f.visible_to IS NULL OR $principal = '*' OR $principal IN f.visible_to)
WITH s, f, o, t, CASE
    WHEN f.expired_at IS NOT NULL AND f.expired_at <= k THEN 'RETIRED'
    WHEN t < f.valid_from THEN 'FUTURE'
    WHEN f.valid_to IS NOT NULL AND f.valid_to <= t THEN 'PAST'
    ELSE 'CURRENT' END AS state
// The caption is the valid interval, short enough that Browser does not cut it on the arrow (it
// has room for about 17 characters): dates without the time, a start's year only when it is not
// valid_at's, an end's only when it is not the start's, an open end as a bare arrow. The arrow
// points at the value; the attribute and every property are in the inspector (click the arrow).
WITH s, f, o, state,
     CASE WHEN f.valid_from.year = t.year THEN substring(toString(date(f.valid_from)), 5)
          ELSE toString(date(f.valid_from)) END AS start,
     CASE WHEN f.valid_to IS NULL THEN ''
          WHEN f.valid_to.year = f.valid_from.year THEN substring(toString(date(f.valid_to)), 5)
          ELSE toString(date(f.valid_to)) END AS end
// The nodes are returned too: Browser draws a relationship only between nodes of the result.
RETURN state, f.attribute AS attribute, f.value AS value, f.valid_from AS valid_from,
       f.valid_to AS valid_to, f.recorded_at AS recorded_at, f.expired_at AS expired_at,
       f.source_episode_id AS episode, [s, o] AS nodes,
       apoc.create.vRelationship(s, state, f {.*, state: state,
         caption: start + '→' + end}, o) AS fact
ORDER BY attribute, valid_from, recorded_at
