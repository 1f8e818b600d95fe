-- Head-to-head duels, one row per round and unordered pair of models (model_a < model_b), both sides from
-- the same round: lift_a is the lift a's
-- environments give solver b, lift_b the lift b's environments give solver a. a wins when its environments
-- give the larger lift and the 95% interval of the difference excludes zero; otherwise the duel is a tie.
-- The interval is Welch's t over the two independent samples of environments (core/stats/intervals.py
-- difference_interval; degrees of freedom floored): the percentile bootstrap it replaces decided 11% of
-- null duels at 3 environments per author (docs/STATISTICS.md). Below var min_envs_for_interval
-- environments on either side, or with no spread, there is no interval (interval_reason says why) and the
-- duel is a tie. decision_control names the multiple-comparison control of the decisions: none yet, each
-- duel is decided at its own 5% level.
with per_env as (
    select round, author, solver, lift from {{ ref('env_solver_stats') }} where not is_self_pair
),

sides as (
    select round, author, solver, count(*) as n, avg(lift) as lift, coalesce(var_samp(lift), 0) as var
    from per_env
    group by round, author, solver
),

pairs as (
    select x.round, x.author as model_a, x.solver as model_b, x.lift as lift_a, y.lift as lift_b,
           x.n as n_envs_a, y.n as n_envs_b,
           sqrt(x.var / x.n + y.var / y.n) as se,
           case when x.var / x.n + y.var / y.n > 0
                then (x.var / x.n + y.var / y.n) ^ 2
                     / ((case when x.n > 1 then (x.var / x.n) ^ 2 / (x.n - 1) else 0 end)
                        + (case when y.n > 1 then (y.var / y.n) ^ 2 / (y.n - 1) else 0 end)) end as df
    from sides as x
    join sides as y on y.round = x.round and y.author = x.solver and y.solver = x.author
    where x.author < x.solver
),

scored as (
    select *, lift_a - lift_b as lift_diff,
           {{ interval_reason('least(n_envs_a, n_envs_b)', 'se') }} as interval_reason
    from pairs
),

bounded as (
    select *,
           case when interval_reason is null
                then greatest(lift_diff - {{ t_critical('df') }} * se, -2) end as lift_diff_lower,
           case when interval_reason is null
                then least(lift_diff + {{ t_critical('df') }} * se, 2) end as lift_diff_upper
    from scored
)

select round::integer as round,
       model_a, model_b,
       lift_a::double as lift_a,
       lift_b::double as lift_b,
       lift_diff::double as lift_diff,
       lift_diff_lower::double as lift_diff_lower,
       lift_diff_upper::double as lift_diff_upper,
       case when lift_diff_lower > 0 then 'a' when lift_diff_upper < 0 then 'b' else 'tie' end as outcome,
       case when lift_diff_lower > 0 then model_a when lift_diff_upper < 0 then model_b end as winner,
       case when lift_diff_lower > 0 then 1.0 when lift_diff_upper < 0 then 0.0 else 0.5 end::double as score_a,
       n_envs_a::integer as n_envs_a,
       n_envs_b::integer as n_envs_b,
       df::double as diff_df,
       se::double as lift_diff_se,
       interval_reason,
       'none (each duel at 5%)' as decision_control
from bounded
