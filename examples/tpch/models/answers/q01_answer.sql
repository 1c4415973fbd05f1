-- TPC-H Q1 as the spec prints it: the maintained result, ordered
{{ config(materialized='view') }}
select * from {{ ref('q01') }}
order by l_returnflag, l_linestatus
