-- One row per (round, environment, solver): success per condition over matched seeds, lift, rescue, harm,
-- category. Rounds never pool: an episode's round is its own (episodes.round) and its environment is looked up
-- by (env_id, round), so a kept child (a byte-identical copy of its parent, under a new env_id) counts in its
-- own round only and the benchmark (round 0) is computed from round-0 rows alone.
-- Incomplete episodes (infrastructure or environment errors) are excluded, and a seed counts only when both
-- its cold and its hinted episode completed (DESIGN §6). Environments known to be invalid are left out.
-- Seeds the adaptive sampler played only because earlier outcomes left its verdict open (episodes.sampling =
-- 'adaptive') are left out too: a mean over a data-dependent number of seeds is biased; the seeds committed
-- before any outcome (every fixed-design seed, the sampler's first min_seeds) are not (docs/STATISTICS.md).
with environments as (
    select round, env_id, any_value(domain) as domain, any_value(family) as family, bool_and(valid) as valid
    from {{ source('warehouse', 'environments') }}
    group by round, env_id
),

-- the matched seeds (macros/matched_seeds.sql: the one SQL definition), committed seeds only
seeds as (
    {{ matched_seeds(source('warehouse', 'episodes'), ['round', 'env_id', 'author', 'solver'], committed_seed()) }}
),

incomplete as (
    select round, env_id, solver, count(*) as n_incomplete
    from {{ source('warehouse', 'episodes') }}
    where status = 'incomplete' and {{ committed_seed() }}
    group by round, env_id, solver
)

select s.round::integer as round,
       s.env_id,
       s.author,
       s.solver,
       s.author = s.solver as is_self_pair,
       coalesce(any_value(e.domain), 'unknown') as domain,
       any_value(e.family) as family,
       count(*)::integer as n_seeds,
       coalesce(any_value(i.n_incomplete), 0)::integer as n_incomplete,
       avg(s.y_cold)::double as p_cold,
       avg(s.y_hint)::double as p_hint,
       avg(s.y_hint - s.y_cold)::double as lift,
       (avg(s.y_hint) filter (where s.y_cold = 0))::double as rescue,
       (avg(1 - s.y_hint) filter (where s.y_cold = 1))::double as harm,
       {{ category('avg(s.y_cold)', 'avg(s.y_hint)') }} as category
from seeds as s
left join environments as e on e.round = s.round and e.env_id = s.env_id
left join incomplete as i on i.round = s.round and i.env_id = s.env_id and i.solver = s.solver
where coalesce(e.valid, true)
group by s.round, s.env_id, s.author, s.solver
