-- Per (round, author, solver): mean over the author's valid environments of the matched-seed lift (environments weigh
-- equally). p_cold and p_hint are averaged the same way, so lift = p_hint - p_cold. Table contract: core/storage/warehouse.py.
-- THE published interval is lift_ci_lower / lift_ci_upper: Student t over the environments' lifts (as
-- core/stats/intervals.py; coverage 0.94-0.98 at 3-30 environments, docs/STATISTICS.md), NULL with lift_ci_reason
-- below var min_envs_for_interval environments or when the environments do not vary. Every reader (checks, lift
-- grid, rankings metadata) uses it. lift_boot_lower / lift_boot_upper are the percentile cluster bootstrap, kept
-- as a DIAGNOSTIC only, plain percentiles, and only from var lift_boot_min_envs (30) environments: below that it was
-- measured to under-cover (0.72 / 0.89 / 0.92 at 3 / 6 / 12), so it is NULL with lift_boot_reason (since 2 Dec 2026;
-- until 1 Dec 2026 it was also widened to hold the lift). Rounds never pool (env_solver_stats); consumers pick theirs
-- (round 0 = the benchmark).
{% set alpha = var('bootstrap_alpha') | float %}
{% set boot_min = var('lift_boot_min_envs') | int %}

with stats as (
    select * from {{ ref('env_solver_stats') }}
),

point as (
    select round, author, solver,
           count(*) as n_envs,
           sum(n_seeds) as n_matched,
           avg(p_cold) as p_cold,
           avg(p_hint) as p_hint,
           avg(lift) as lift,
           stddev_samp(lift) / sqrt(count(*)) as lift_se
    from stats
    group by round, author, solver
),

boot as (
    select round, author, solver,
           quantile_cont(lift, {{ alpha / 2 }}) as q_lower,
           quantile_cont(lift, {{ 1 - alpha / 2 }}) as q_upper
    from {{ ref('pair_lift_bootstrap') }}
    group by round, author, solver
),

incomplete as (
    select round, author, solver, count(*) as n_incomplete
    from {{ source('warehouse', 'episodes') }}
    where status = 'incomplete' and {{ committed_seed() }}  -- as env_solver_stats
    group by round, author, solver
)

select p.round::integer as round,
       p.author,
       p.solver,
       p.author = p.solver as is_self_pair,
       p.n_envs::integer as n_envs,
       p.n_matched::integer as n_matched,
       coalesce(i.n_incomplete, 0)::integer as n_incomplete,
       p.p_cold::double as p_cold,
       p.p_hint::double as p_hint,
       p.lift::double as lift,
       (case when p.n_envs >= {{ boot_min }} then b.q_lower end)::double as lift_boot_lower,  -- plain percentiles,
       (case when p.n_envs >= {{ boot_min }} then b.q_upper end)::double as lift_boot_upper,  -- where calibrated
       (case when {{ interval_reason('p.n_envs', 'p.lift_se') }} is null
             then greatest(p.lift - {{ t_critical('p.n_envs - 1') }} * p.lift_se, -1) end)::double as lift_ci_lower,
       (case when {{ interval_reason('p.n_envs', 'p.lift_se') }} is null
             then least(p.lift + {{ t_critical('p.n_envs - 1') }} * p.lift_se, 1) end)::double as lift_ci_upper,
       {{ interval_reason('p.n_envs', 'p.lift_se') }} as lift_ci_reason,
       (case when p.n_envs < {{ boot_min }}
             then 'not calibrated: ' || p.n_envs || ' environment' || (case when p.n_envs = 1 then '' else 's' end)
                  || ' (the percentile bootstrap under-covers below {{ boot_min }}; the published interval is lift_ci_lower/lift_ci_upper)'
        end) as lift_boot_reason
from point as p
left join boot as b on b.round = p.round and b.author = p.author and b.solver = p.solver
left join incomplete as i on i.round = p.round and i.author = p.author and i.solver = p.solver
