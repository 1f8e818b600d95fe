-- Per (round, solver): cold success on environments by other authors, averaged within domain and then across domains
-- (so a domain with many environments does not dominate); the same for hinted success; hint gain is the
-- difference. Own environments are excluded.
with peers as (
    select round, solver, domain, p_cold, p_hint
    from {{ ref('env_solver_stats') }}
    where not is_self_pair
),

by_domain as (
    select round, solver, domain, count(*) as n_envs, avg(p_cold) as cold, avg(p_hint) as hint
    from peers
    group by round, solver, domain
)

select round::integer as round,
       solver,
       sum(n_envs)::integer as n_envs,
       count(*)::integer as n_domains,
       avg(cold)::double as cold_success,
       avg(hint)::double as hinted_success,
       (avg(hint) - avg(cold))::double as hint_gain
from by_domain
group by round, solver
