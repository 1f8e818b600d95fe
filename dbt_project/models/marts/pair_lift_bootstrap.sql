-- Cluster-bootstrap replicates of pair lift: replicate `rep` resamples the author's environments with
-- replacement (seeds stay together inside an environment, so the cold/hinted pairing survives) and averages
-- the per-environment lifts, weighing environments equally as pair_lift does. Intermediate table for the
-- intervals of pair_lift and duels.
--
-- Deterministic and cheap: for every environment count n and replicate r, n positions are drawn with
-- replacement by hashing (n, r, j) and kept as a cumulative histogram (how many draws fell at or below
-- position m). A pair's environments are ordered by lift value, so each distinct value owns a run of
-- positions and the number of times it is drawn is a difference of two histogram entries: the replicate
-- costs one row per distinct value (a handful: lifts are multiples of 1/seeds) instead of one per
-- environment. An author with n environments reads histogram (r + offset) mod R at replicate r, where
-- offset is the author's position in name order, so two authors never share draws within a replicate and
-- the two sides of a duel are resampled independently. Environments of the author on which the solver has
-- no result form a bucket of their own and are left out of that replicate's mean.
{% set reps = var('bootstrap_reps') | int %}

with stats as (
    select author, solver, env_id, lift
    from {{ ref('env_solver_stats') }}
),

authors as (
    select author, count(distinct env_id) as n, (dense_rank() over (order by author) - 1) as "offset"
    from stats
    group by author
),

buckets as (
    select author, solver, lift, count(*) as k
    from stats
    group by author, solver, lift
    union all
    select p.author, p.solver, null as lift, a.n - p.n_results as k
    from (select author, solver, count(*) as n_results from stats group by author, solver) as p
    join authors as a on a.author = p.author
    where a.n > p.n_results
),

runs as (
    select b.author, b.solver, b.lift, a.n, a."offset",
           sum(b.k) over (partition by b.author, b.solver order by b.lift nulls last
                          rows between unbounded preceding and current row)::bigint as upto,
           b.k
    from buckets as b
    join authors as a on a.author = b.author
),

sizes as (
    select distinct n from authors
),

draws as (
    select n, rep, pos, count(*) as k
    from (
        select s.n, r.rep,
               unnest(list_transform(range(s.n), lambda j: 1 + (hash(s.n, r.rep, j) % s.n)::bigint)) as pos
        from sizes as s, range({{ reps }}) as r(rep)
    )
    group by n, rep, pos
),

histogram as (
    select g.n, g.rep, g.m,
           sum(coalesce(d.k, 0)) over (partition by g.n, g.rep order by g.m
                                       rows between unbounded preceding and current row)::bigint as at_or_below
    from (select s.n, r.rep, unnest(range(s.n + 1)) as m from sizes as s, range({{ reps }}) as r(rep)) as g
    left join draws as d on d.n = g.n and d.rep = g.rep and d.pos = g.m
),

runs_by_rep as (
    select r.author, r.solver, r.lift, r.n, r.upto, r.upto - r.k as below, x.rep,
           (x.rep + r."offset") % {{ reps }} as draw_rep
    from runs as r
    cross join range({{ reps }}) as x(rep)
),

-- two lookups in two steps: joined at once, the planner pairs histogram rows with each other first
upper_counts as materialized (
    select r.author, r.solver, r.lift, r.rep, r.n, r.draw_rep, r.below, h.at_or_below as upto_count
    from runs_by_rep as r
    join histogram as h on h.n = r.n and h.rep = r.draw_rep and h.m = r.upto
),

drawn as (
    select u.author, u.solver, u.lift, u.rep, u.upto_count - h.at_or_below as times
    from upper_counts as u
    join histogram as h on h.n = u.n and h.rep = u.draw_rep and h.m = u.below
),

replicates as (
    select author, solver, rep,
           sum(times * lift) / sum(times) filter (where lift is not null) as lift
    from drawn
    group by author, solver, rep
)

select author, solver, rep::integer as rep, lift::double as lift
from replicates
where lift is not null
