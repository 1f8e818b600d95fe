-- Cluster-bootstrap replicates of pair lift, per round: replicate `rep` resamples the author's environments of
-- that round with
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
-- no result form a bucket of their own and are left out of that replicate's mean. Sizes and offsets are per
-- (round, author): an author's round-1 environments are resampled among themselves, never pooled with round 0.
--
-- Empty resamples by construction: a replicate whose draws all fall in the no-result bucket has no drawn lift;
-- it is dropped before any division (HAVING sum(times) > 0), so no replicate is ever 0/0 (NULL or NaN).
-- That happens when a solver played only some of an author's environments of a round (a model added after
-- the round was written). The mean of drawn lifts in [-1, 1] with positive weights stays in [-1, 1].
{% set reps = var('bootstrap_reps') | int %}

with stats as (
    select round, author, solver, env_id, lift
    from {{ ref('env_solver_stats') }}
),

authors as (
    select round, author, count(distinct env_id) as n,
           (dense_rank() over (partition by round order by author) - 1) as "offset"
    from stats
    group by round, author
),

buckets as (
    select round, author, solver, lift, count(*) as k
    from stats
    group by round, author, solver, lift
    union all
    select p.round, p.author, p.solver, null as lift, a.n - p.n_results as k
    from (select round, author, solver, count(*) as n_results from stats group by round, author, solver) as p
    join authors as a on a.round = p.round and a.author = p.author
    where a.n > p.n_results
),

runs as (
    select b.round, b.author, b.solver, b.lift, a.n, a."offset",
           sum(b.k) over (partition by b.round, b.author, b.solver order by b.lift nulls last
                          rows between unbounded preceding and current row)::bigint as upto,
           b.k
    from buckets as b
    join authors as a on a.round = b.round and a.author = b.author
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
    select r.round, r.author, r.solver, r.lift, r.n, r.upto, r.upto - r.k as below, x.rep,
           (x.rep + r."offset") % {{ reps }} as draw_rep
    from runs as r
    cross join range({{ reps }}) as x(rep)
),

-- two lookups in two steps: joined at once, the planner pairs histogram rows with each other first
upper_counts as materialized (
    select r.round, r.author, r.solver, r.lift, r.rep, r.n, r.draw_rep, r.below, h.at_or_below as upto_count
    from runs_by_rep as r
    join histogram as h on h.n = r.n and h.rep = r.draw_rep and h.m = r.upto
),

drawn as (
    select u.round, u.author, u.solver, u.lift, u.rep, u.upto_count - h.at_or_below as times
    from upper_counts as u
    join histogram as h on h.n = u.n and h.rep = u.draw_rep and h.m = u.below
),

-- only the drawn environments with a result: the no-result bucket and undrawn values never reach the mean
replicates as (
    select round, author, solver, rep,
           sum(times * lift) / nullif(sum(times), 0) as lift
    from drawn
    where lift is not null and times > 0
    group by round, author, solver, rep
    having sum(times) > 0
)

select round::integer as round, author, solver, rep::integer as rep, lift::double as lift
from replicates
