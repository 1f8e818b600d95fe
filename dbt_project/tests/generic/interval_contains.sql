{#- An interval is well formed and contains its point estimate: lower <= estimate <= upper, all present
    whenever the estimate is. `column_name` is the estimate; lower/upper default to <column>_lower/_upper. -#}
{% test interval_contains(model, column_name, lower=none, upper=none, tolerance=1e-9) %}
{%- set lower = lower or column_name ~ '_lower' -%}
{%- set upper = upper or column_name ~ '_upper' -%}
select {{ lower }} as lower, {{ column_name }} as estimate, {{ upper }} as upper
from {{ model }}
where {{ column_name }} is not null
  and ({{ lower }} is null
       or {{ upper }} is null
       or {{ lower }} > {{ column_name }} + {{ tolerance }}
       or {{ column_name }} > {{ upper }} + {{ tolerance }})
{% endtest %}
