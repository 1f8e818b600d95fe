{#- The matched seed and the category rule, defined once for the warehouse (DESIGN §6).

    A matched seed is one (keys..., seed) whose cold AND hinted episodes both completed (status <> 'incomplete'):
    y_cold / y_hint are 1.0 for success, else 0.0. Every statistic of lift is a mean over matched seeds.
    Python's one copy is envduels_dagster/core/stats/matched_sql.py (the asset checks run it, and so does
    core/stats/lift.py on data frames); tests/core/stats/test_matched_sql.py runs this macro (rendered with
    Jinja, as dbt does) and that module on one warehouse and asserts the same rows. Change both together. -#}
{% macro matched_seeds(episodes, keys, where='true') %}
select {{ keys | join(', ') }}, seed,
       max(case when condition = 'cold' then (status = 'success')::double end) as y_cold,
       max(case when condition = 'hinted' then (status = 'success')::double end) as y_hint
from {{ episodes }}
where status <> 'incomplete' and ({{ where }})
group by {{ keys | join(', ') }}, seed
having count(*) filter (where condition = 'cold') > 0
   and count(*) filter (where condition = 'hinted') > 0
{%- endmacro %}

{#- Seeds committed before any outcome was seen: every fixed-design seed and the adaptive sampler's first
    min_seeds. The seeds it played only because earlier outcomes left its verdict open (sampling = 'adaptive')
    are not: a mean over a data-dependent number of seeds is biased (docs/STATISTICS.md). -#}
{% macro committed_seed() -%}
coalesce(sampling, 'fixed') <> 'adaptive'
{%- endmacro %}

{#- The category of an (environment, solver) from its success rates; Python: core/stats/rules.categorize
    (tests/assets/marts/test_marts.py holds the two equal). -#}
{% macro category(p_cold, p_hint) -%}
(case when {{ p_cold }} > 0 then 'wasted'
      when {{ p_hint }} > 0 then 'learnable'
      else 'noise' end)
{%- endmacro %}
