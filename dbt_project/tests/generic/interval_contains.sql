{#- An interval is well formed and contains its point estimate: lower <= estimate <= upper, all present
    whenever the estimate is. `column_name` is the estimate; lower/upper default to <column>_lower/_upper.
    With `reason`: the interval is absent (both bounds NULL) exactly when the reason column is set. -#}
{% test interval_contains(model, column_name, lower=none, upper=none, tolerance=1e-9, reason=none) %}
{%- set lower = lower or column_name ~ '_lower' -%}
{%- set upper = upper or column_name ~ '_upper' -%}
{%- set malformed -%}
({{ lower }} is null
       or {{ upper }} is null
       or {{ lower }} > {{ column_name }} + {{ tolerance }}
       or {{ column_name }} > {{ upper }} + {{ tolerance }})
{%- endset %}
select {{ lower }} as lower, {{ column_name }} as estimate, {{ upper }} as upper
from {{ model }}
where {{ column_name }} is not null
{%- if reason %}
  and (({{ reason }} is not null and ({{ lower }} is not null or {{ upper }} is not null))
       or ({{ reason }} is null and {{ malformed }}))
{%- else %}
  and {{ malformed }}
{%- endif %}
{% endtest %}
