{#- Why a t interval over environments is absent (NULL when it is given); the same text as
    core/stats/intervals.py, so the Python and SQL rows compare equal. -#}
{% macro interval_reason(n, se) %}
{%- set min_n = var('min_envs_for_interval') | int -%}
(case when {{ n }} < {{ min_n }}
      then 'insufficient data: ' || {{ n }} || ' environment' || (case when {{ n }} = 1 then '' else 's' end)
           || ' (an interval needs at least {{ min_n }})'
      when coalesce({{ se }}, 0) < 1e-12
      then 'insufficient data: every environment gives the same value (its spread is unknown)'
 end)
{%- endmacro %}
