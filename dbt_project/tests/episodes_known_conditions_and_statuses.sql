-- The input of env_solver_stats: conditions are cold/hinted and statuses success/failure/incomplete
-- (anything else would silently count as a failure). Checked on env_solver_stats, which relies on it.
{{ config(meta={'dagster': {'ref': {'name': 'env_solver_stats'}}}) }}
-- depends_on: {{ ref('env_solver_stats') }}

select env_id, solver, seed, condition, status
from {{ source('warehouse', 'episodes') }}
where condition not in ('cold', 'hinted')
   or status is null
   or status not in ('success', 'failure', 'incomplete')
