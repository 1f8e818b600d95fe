-- Per (round, author): validity rate of what it wrote, design score (peer discrimination) and hint score (peer lift).
-- Design: per environment, the peer panel's discrimination sum_{i<j} |r_i - r_j| / floor(n^2 / 4) over the
-- cold success rates r of the n solvers other than the author (close to 4p(1-p): highest when the panel
-- splits), averaged over the author's environments; it needs n >= 2. The pairwise sum uses the sorted
-- identity sum_{i<j} |r_i - r_j| = sum_k r_(k) (2k - n - 1). Hint: mean over the author's environments of
-- the mean lift they give the other solvers. n_written / n_valid count the author's environments of that round
-- (a kept copy in round r is written once, in round r; its parent counts in its own round).
with peers as (
    select round, env_id, author, solver, p_cold, lift
    from {{ ref('env_solver_stats') }}
    where not is_self_pair
),

ranked as (
    select round, env_id, author, p_cold, lift,
           row_number() over (partition by round, env_id order by p_cold, solver) as k,
           count(*) over (partition by round, env_id) as n
    from peers
),

per_env as (
    select round, env_id, author,
           any_value(n) as n_peers,
           case when any_value(n) >= 2
                then sum(p_cold * (2 * k - n - 1)) / floor(any_value(n) * any_value(n) / 4) end as discrimination,
           avg(lift) as peer_lift
    from ranked
    group by round, env_id, author
),

per_author as (
    select round, author,
           count(*) as n_envs_scored,
           avg(discrimination) as design_score,
           avg(peer_lift) as hint_score,
           max(n_peers) as n_peer_solvers
    from per_env
    group by round, author
),

written as (
    select round, author, count(*) as n_written, count(*) filter (where valid) as n_valid
    from {{ source('warehouse', 'environments') }}
    group by round, author
)

select coalesce(w.round, a.round)::integer as round,
       coalesce(w.author, a.author) as author,
       coalesce(w.n_written, 0)::integer as n_written,
       coalesce(w.n_valid, 0)::integer as n_valid,
       (w.n_valid / nullif(w.n_written, 0))::double as validity_rate,
       coalesce(a.n_envs_scored, 0)::integer as n_envs_scored,
       coalesce(a.n_peer_solvers, 0)::integer as n_peer_solvers,
       a.design_score::double as design_score,
       a.hint_score::double as hint_score
from written as w
full outer join per_author as a on a.round = w.round and a.author = w.author
