-- Head-to-head duels, one row per unordered pair of models (model_a < model_b): lift_a is the lift a's
-- environments give solver b, lift_b the lift b's environments give solver a. a wins when its environments
-- give the larger lift and the 95% interval of the difference (paired bootstrap replicates of pair_lift;
-- the two authors' environments are resampled independently) excludes zero; otherwise the duel is a tie.
{% set alpha = var('bootstrap_alpha') | float %}

with lift as (
    select author, solver, lift from {{ ref('pair_lift') }} where not is_self_pair
),

pairs as (
    select x.author as model_a, x.solver as model_b, x.lift as lift_a, y.lift as lift_b
    from lift as x
    join lift as y on y.author = x.solver and y.solver = x.author
    where x.author < x.solver
),

boot as (
    select p.model_a, p.model_b,
           quantile_cont(ba.lift - bb.lift, {{ alpha / 2 }}) as q_lower,
           quantile_cont(ba.lift - bb.lift, {{ 1 - alpha / 2 }}) as q_upper
    from pairs as p
    join {{ ref('pair_lift_bootstrap') }} as ba on ba.author = p.model_a and ba.solver = p.model_b
    join {{ ref('pair_lift_bootstrap') }} as bb
      on bb.author = p.model_b and bb.solver = p.model_a and bb.rep = ba.rep
    group by p.model_a, p.model_b
),

scored as (
    select p.model_a, p.model_b, p.lift_a, p.lift_b,
           p.lift_a - p.lift_b as lift_diff,
           least(coalesce(b.q_lower, p.lift_a - p.lift_b), p.lift_a - p.lift_b) as lift_diff_lower,
           greatest(coalesce(b.q_upper, p.lift_a - p.lift_b), p.lift_a - p.lift_b) as lift_diff_upper
    from pairs as p
    left join boot as b on b.model_a = p.model_a and b.model_b = p.model_b
)

select model_a, model_b,
       lift_a::double as lift_a,
       lift_b::double as lift_b,
       lift_diff::double as lift_diff,
       lift_diff_lower::double as lift_diff_lower,
       lift_diff_upper::double as lift_diff_upper,
       case when lift_diff_lower > 0 then 'a' when lift_diff_upper < 0 then 'b' else 'tie' end as outcome,
       case when lift_diff_lower > 0 then model_a when lift_diff_upper < 0 then model_b end as winner,
       case when lift_diff_lower > 0 then 1.0 when lift_diff_upper < 0 then 0.0 else 0.5 end::double as score_a
from scored
