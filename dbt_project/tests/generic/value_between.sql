{#- Every non-null value of the column lies in [min_value, max_value] (e.g. a lift in [-1, 1]). -#}
{% test value_between(model, column_name, min_value, max_value) %}
select {{ column_name }} as value
from {{ model }}
where {{ column_name }} < {{ min_value }} or {{ column_name }} > {{ max_value }}
{% endtest %}
