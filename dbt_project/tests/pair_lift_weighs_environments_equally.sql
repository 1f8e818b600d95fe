-- pair_lift.lift is, per round, the unweighted mean over environments of env_solver_stats.lift (DESIGN §6), whatever
-- the number of matched seeds per environment.
{{ config(meta={'dagster': {'ref': {'name': 'pair_lift'}}}) }}

with recomputed as (
    select round, author, solver, avg(lift) as lift, count(*) as n_envs
    from {{ ref('env_solver_stats') }}
    group by round, author, solver
)

select coalesce(p.round, r.round) as round, p.author, p.solver, p.lift, r.lift as recomputed
from {{ ref('pair_lift') }} as p
full outer join recomputed as r on r.round = p.round and r.author = p.author and r.solver = p.solver
where p.lift is null or r.lift is null or abs(p.lift - r.lift) > 1e-9 or p.n_envs <> r.n_envs
