-- TPC-H Q7 as the spec prints it: the maintained result, ordered
{{ config(materialized='view') }}
select * from {{ ref('q07') }}
order by supp_nation, cust_nation, l_year
