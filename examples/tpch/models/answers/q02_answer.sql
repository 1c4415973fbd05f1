-- TPC-H Q2 as the spec prints it: the maintained result, ordered and cut
{{ config(materialized='view') }}
select * from {{ ref('q02') }}
order by s_acctbal desc, n_name, s_name, p_partkey
limit 100
