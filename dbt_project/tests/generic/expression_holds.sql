{#- A row-level invariant: `expression` is true (or null) on every row. -#}
{% test expression_holds(model, expression) %}
select *
from {{ model }}
where not ({{ expression }})
{% endtest %}
