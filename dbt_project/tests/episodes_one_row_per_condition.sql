-- The input of env_solver_stats: at most one episode per (environment, solver, seed, condition), so that a
-- seed's cold and hinted results pair up unambiguously. Checked on env_solver_stats, which relies on it.
{{ config(meta={'dagster': {'ref': {'name': 'env_solver_stats'}}}) }}
-- depends_on: {{ ref('env_solver_stats') }}

select env_id, solver, seed, condition, count(*) as n_rows
from {{ source('warehouse', 'episodes') }}
group by env_id, solver, seed, condition
having count(*) > 1
