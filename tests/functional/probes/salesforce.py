"""fivetran/dbt_salesforce as the probe runs it (tests/functional/probe_real_projects.py):
`sf_` keyless, `sfk_` with the package's key tests (MODEL_TESTS)."""
from __future__ import annotations

from tests.functional.probes.common import C, O, P, PR, asserted, dbt_dateadd, ported

# fivetran/dbt_salesforce (v2.1.0, its staging package merged into it) as a Spark user ports
# it: its default vars (user_role, lead, task, event, product_2, order and opportunity_line_item
# all enabled; no pass-through columns, so persist/fill_pass_through_columns compile to
# nothing), the intermediate models (ephemeral in the package) built as models, stg_order kept
# though no end model reads it. Staging keeps the package's fields -> final (-> calculated)
# CTEs as they compile: get_<object>_columns plus add_renamed_columns (each multi-word column
# again in Salesforce's CamelCase spelling), fill_staging_columns (a column the source lacks as a
# typed NULL), coalesce_rename (`coalesce(cast(CamelCase as t), cast(snake_case as t)) as
# alias`), dbt's types as dbt-spark spells them (type_numeric decimal(28,6), type_float float,
# type_int integer). Each source table is a `base` CTE synthesized from one probe table, with
# snake_case columns but for user, whose connector kept Salesforce's CamelCase names (ManagerId,
# UserRoleId, ...). Accounts, users, contacts and leads come from customers (users 1-3 the
# managers of the others by id % 3 + 1, roles by id % 4 + 1; blocked accounts and contacts
# deleted at times; `apac` leads unconverted, NULL-region ones NULL), user roles and products
# from products, opportunities from orders (customer_id the account, user
# (customer_id + product_id) % 12 + 1 the owner, status the stage: paid won, cancelled lost, new
# and shipped open with a pipeline / forecast / best-case / omitted forecast category), events
# and orders from orders, opportunity line items and tasks from payments (order_id the
# opportunity). Dates are ids in days (line items' created dates ids in hours, so the line index
# has no ties). `current_timestamp` (dbt.current_timestamp_backcompat) in the opportunity's
# this-month / this-quarter flags and day counts is fixed to 2024-06-15 12:00; dbt.date_trunc
# and dbt.datediff (dbt-spark's `datediff(second, first)` with its assert_not_null checks, as
# common.asserted) spelled out. The daily activity's date spine is fixed to 2024-01-01 .. 2024-12-31 (the
# package queries the first lead's created date and runs to `current_date` at compile time),
# dbt_utils.date_spine compiled as on Spark (generate_series of 9 powers of two cut at 366,
# dbt.dateadd of the row number as common.dbt_dateadd), its `-- depends_on` ref kept. Skipped: the
# history-mode models (salesforce__{account,contact,opportunity}_daily_history and their
# staging: disabled by default, incremental, reading Fivetran history-mode tables'
# _fivetran_start/_fivetran_end, a spine to `current_date`). Keyless, and again (`sfk_`) with the
# package's unique + not_null tests on each staging and end model's id.
_SF_AT = "date'2024-01-01'"
_SF_NOW = "timestamp'2024-06-15 12:00:00'"
# get_<object>_columns as they compile on Spark (dbt.type_string string, type_timestamp
# timestamp, type_float float, type_numeric decimal(28,6), type_int integer, type_boolean boolean)
_SF_COLUMNS = {
    "account": (
        "_fivetran_synced timestamp, _fivetran_active boolean, account_number string, "
        "account_source string, annual_revenue float, billing_city string, billing_country string, "
        "billing_postal_code string, billing_state string, billing_state_code string, "
        "billing_street string, description string, id string, industry string, is_deleted boolean, "
        "last_activity_date timestamp, last_referenced_date timestamp, last_viewed_date timestamp, "
        "master_record_id string, name string, number_of_employees integer, owner_id string, "
        "ownership string, parent_id string, rating string, record_type_id string, "
        "shipping_city string, shipping_country string, shipping_country_code string, "
        "shipping_postal_code string, shipping_state string, shipping_state_code string, "
        "shipping_street string, type string, website string"),
    "contact": (
        "_fivetran_synced timestamp, _fivetran_active boolean, account_id string, department string, "
        "description string, email string, first_name string, home_phone string, id string, "
        "individual_id string, is_deleted boolean, last_activity_date timestamp, "
        "last_modified_by_id string, last_modified_date timestamp, last_name string, "
        "last_referenced_date timestamp, last_viewed_date timestamp, lead_source string, "
        "mailing_city string, mailing_country string, mailing_country_code string, "
        "mailing_postal_code string, mailing_state string, mailing_state_code string, "
        "mailing_street string, master_record_id string, mobile_phone string, name string, "
        "owner_id string, phone string, reports_to_id string, title string"),
    "event": (
        "_fivetran_synced timestamp, _fivetran_active boolean, account_id string, "
        "activity_date timestamp, activity_date_time timestamp, created_by_id string, "
        "created_date timestamp, description string, end_date timestamp, end_date_time timestamp, "
        "event_subtype string, group_event_type string, id string, is_archived boolean, "
        "is_child boolean, is_deleted boolean, is_group_event boolean, is_recurrence boolean, "
        "last_modified_by_id string, last_modified_date timestamp, location string, owner_id string, "
        "start_date_time timestamp, subject string, type string, what_count integer, what_id string, "
        "who_count integer, who_id string"),
    "lead": (
        "_fivetran_synced timestamp, _fivetran_active boolean, annual_revenue float, city string, "
        "company string, converted_account_id string, converted_contact_id string, "
        "converted_date timestamp, converted_opportunity_id string, country string, "
        "country_code string, created_by_id string, created_date timestamp, description string, "
        "email string, email_bounced_date timestamp, email_bounced_reason string, first_name string, "
        "has_opted_out_of_email boolean, id string, individual_id string, industry string, "
        "is_converted boolean, is_deleted boolean, is_unread_by_owner boolean, "
        "last_activity_date timestamp, last_modified_by_id string, last_modified_date timestamp, "
        "last_name string, last_referenced_date timestamp, last_viewed_date timestamp, "
        "lead_source string, master_record_id string, mobile_phone string, name string, "
        "number_of_employees integer, owner_id string, phone string, postal_code string, "
        "state string, state_code string, status string, street string, title string, "
        "website string"),
    "opportunity": (
        "_fivetran_synced timestamp, _fivetran_active boolean, account_id string, amount float, "
        "campaign_id string, close_date timestamp, created_date timestamp, description string, "
        "expected_revenue decimal(28,6), fiscal string, fiscal_quarter integer, fiscal_year integer, "
        "forecast_category string, forecast_category_name string, has_open_activity boolean, "
        "has_opportunity_line_item boolean, has_overdue_task boolean, id string, is_closed boolean, "
        "is_deleted boolean, is_won boolean, last_activity_date timestamp, "
        "last_referenced_date timestamp, last_viewed_date timestamp, lead_source string, "
        "name string, next_step string, owner_id string, probability float, record_type_id string, "
        "stage_name string, synced_quote_id string, type string"),
    "opportunity_line_item": (
        "_fivetran_synced timestamp, _fivetran_active boolean, created_by_id string, "
        "created_date timestamp, description string, discount float, has_quantity_schedule boolean, "
        "has_revenue_schedule boolean, has_schedule boolean, id string, is_deleted boolean, "
        "last_modified_by_id string, last_modified_date timestamp, last_referenced_date timestamp, "
        "last_viewed_date timestamp, list_price float, name string, opportunity_id string, "
        "pricebook_entry_id string, product_2_id string, product_code string, quantity float, "
        "service_date timestamp, sort_order integer, total_price float, unit_price float"),
    "order": (
        "_fivetran_synced timestamp, _fivetran_active boolean, account_id string, "
        "activated_by_id string, activated_date timestamp, billing_city string, "
        "billing_country string, billing_country_code string, billing_postal_code string, "
        "billing_state string, billing_state_code string, billing_street string, contract_id string, "
        "created_by_id string, created_date timestamp, description string, end_date timestamp, "
        "id string, is_deleted boolean, last_modified_by_id string, last_modified_date timestamp, "
        "last_referenced_date timestamp, last_viewed_date timestamp, opportunity_id string, "
        "order_number string, original_order_id string, owner_id string, pricebook_2_id string, "
        "shipping_city string, shipping_country string, shipping_country_code string, "
        "shipping_postal_code string, shipping_state string, shipping_state_code string, "
        "shipping_street string, status string, total_amount float, type string"),
    "product_2": (
        "_fivetran_synced timestamp, _fivetran_active boolean, created_by_id string, "
        "created_date timestamp, description string, display_url string, external_id string, "
        "family string, id string, is_active boolean, is_archived boolean, is_deleted boolean, "
        "last_modified_by_id string, last_modified_date timestamp, last_referenced_date timestamp, "
        "last_viewed_date timestamp, name string, number_of_quantity_installments integer, "
        "number_of_revenue_installments integer, product_code string, "
        "quantity_installment_period string, quantity_schedule_type string, "
        "quantity_unit_of_measure string, record_type_id string, revenue_installment_period string, "
        "revenue_schedule_type string"),
    "task": (
        "_fivetran_synced timestamp, _fivetran_active boolean, account_id string, "
        "activity_date timestamp, call_disposition string, call_duration_in_seconds integer, "
        "call_object string, call_type string, completed_date_time timestamp, created_by_id string, "
        "created_date timestamp, description string, id string, is_archived boolean, "
        "is_closed boolean, is_deleted boolean, is_high_priority boolean, "
        "last_modified_by_id string, last_modified_date timestamp, owner_id string, priority string, "
        "record_type_id string, status string, subject string, task_subtype string, type string, "
        "what_count integer, what_id string, who_count integer, who_id string"),
    "user": (
        "_fivetran_deleted boolean, _fivetran_active boolean, _fivetran_synced timestamp, "
        "account_id string, alias string, city string, company_name string, contact_id string, "
        "country string, country_code string, department string, email string, first_name string, "
        "id string, individual_id string, is_active boolean, last_login_date timestamp, "
        "last_name string, last_referenced_date timestamp, last_viewed_date timestamp, "
        "manager_id string, name string, postal_code string, profile_id string, state string, "
        "state_code string, street string, title string, user_role_id string, user_type string, "
        "username string"),
    "user_role": (
        "_fivetran_deleted boolean, _fivetran_active boolean, _fivetran_synced timestamp, "
        "developer_name string, id string, name string, opportunity_access_for_account_owner string, "
        "parent_role_id string, rollup_description string"),
}
# each staging model's coalesce_rename calls in order: column[>alias][:datatype override]
_SF_FINAL = {
    "account": (
        "account_number, account_source, annual_revenue:decimal(28,6), billing_city, "
        "billing_country, billing_postal_code, billing_state, billing_state_code, billing_street, "
        "description>account_description, id>account_id, industry, is_deleted, last_activity_date, "
        "last_referenced_date, last_viewed_date, master_record_id, name>account_name, "
        "number_of_employees, owner_id, ownership, parent_id, rating, record_type_id, shipping_city, "
        "shipping_country, shipping_country_code, shipping_postal_code, shipping_state, "
        "shipping_state_code, shipping_street, type, website"),
    "contact": (
        "id>contact_id, account_id, department, description>contact_description, email, first_name, "
        "home_phone, individual_id, is_deleted, last_activity_date, last_modified_by_id, "
        "last_modified_date, last_name, last_referenced_date, last_viewed_date, lead_source, "
        "mailing_city, mailing_country, mailing_country_code, mailing_postal_code, mailing_state, "
        "mailing_state_code, mailing_street, master_record_id, mobile_phone, name>contact_name, "
        "owner_id, phone, reports_to_id, title"),
    "event": (
        "id>event_id, account_id, activity_date, activity_date_time, created_by_id, created_date, "
        "description>event_description, end_date, end_date_time, event_subtype, group_event_type, "
        "is_archived, is_child, is_deleted, is_group_event, is_recurrence, last_modified_by_id, "
        "last_modified_date, location, owner_id, start_date_time, subject, type, what_count, "
        "what_id, who_count, who_id"),
    "lead": (
        "id>lead_id, annual_revenue:decimal(28,6), city, company, converted_account_id, "
        "converted_contact_id, converted_date, converted_opportunity_id, country, country_code, "
        "created_by_id, created_date, description>lead_description, email, email_bounced_date, "
        "email_bounced_reason, first_name, has_opted_out_of_email, individual_id, industry, "
        "is_converted, is_deleted, is_unread_by_owner, last_activity_date, last_modified_by_id, "
        "last_modified_date, last_name, last_referenced_date, last_viewed_date, lead_source, "
        "master_record_id, mobile_phone, name>lead_name, number_of_employees, owner_id, phone, "
        "postal_code, state, state_code, status, street, title, website"),
    "opportunity": (
        "account_id, amount:decimal(28,6), campaign_id, close_date, created_date, "
        "description>opportunity_description, expected_revenue, fiscal, fiscal_quarter, fiscal_year, "
        "forecast_category, forecast_category_name, has_open_activity, has_opportunity_line_item, "
        "has_overdue_task, id>opportunity_id, is_closed, is_deleted, is_won, last_activity_date, "
        "last_referenced_date, last_viewed_date, lead_source, name>opportunity_name, next_step, "
        "owner_id, probability, record_type_id, stage_name, synced_quote_id, type"),
    "opportunity_line_item": (
        "id>opportunity_line_item_id, created_by_id, created_date, "
        "description>opportunity_line_item_description, discount, has_quantity_schedule, "
        "has_revenue_schedule, has_schedule, is_deleted, last_modified_by_id, last_modified_date, "
        "last_referenced_date, last_viewed_date, list_price:decimal(28,6), "
        "name>opportunity_line_item_name, opportunity_id, pricebook_entry_id, product_2_id, "
        "product_code, quantity, service_date, sort_order, total_price:decimal(28,6), "
        "unit_price:decimal(28,6)"),
    "order": (
        "id>order_id, account_id, activated_by_id, activated_date, billing_city, billing_country, "
        "billing_country_code, billing_postal_code, billing_state, billing_state_code, "
        "billing_street, contract_id, created_by_id, created_date, description>order_description, "
        "end_date, is_deleted, last_modified_by_id, last_modified_date, last_referenced_date, "
        "last_viewed_date, opportunity_id, order_number, original_order_id, owner_id, "
        "pricebook_2_id, shipping_city, shipping_country, shipping_country_code, "
        "shipping_postal_code, shipping_state, shipping_state_code, shipping_street, status, "
        "total_amount:decimal(28,6), type"),
    "product_2": (
        "id>product_2_id, created_by_id, created_date, description>product_2_description, "
        "display_url, external_id, family, is_active, is_archived, is_deleted, last_modified_by_id, "
        "last_modified_date, last_referenced_date, last_viewed_date, name>product_2_name, "
        "number_of_quantity_installments, number_of_revenue_installments, product_code, "
        "quantity_installment_period, quantity_schedule_type, quantity_unit_of_measure, "
        "record_type_id, revenue_installment_period, revenue_schedule_type"),
    "task": (
        "id>task_id, account_id, activity_date, call_disposition, call_duration_in_seconds, "
        "call_object, call_type, completed_date_time, created_by_id, created_date, "
        "description>task_description, is_archived, is_closed, is_deleted, is_high_priority, "
        "last_modified_by_id, last_modified_date, owner_id, priority, record_type_id, status, "
        "subject, task_subtype, type, what_count, what_id, who_count, who_id"),
    "user": (
        "account_id, alias, city, company_name, contact_id, country, country_code, department, "
        "email, first_name, id>user_id, individual_id, is_active, last_login_date, last_name, "
        "last_referenced_date, last_viewed_date, manager_id, name>user_name, postal_code, "
        "profile_id, state, state_code, street, title, user_role_id, user_type, username"),
    "user_role": (
        "developer_name, id>user_role_id, name>user_role_name, opportunity_access_for_account_owner, "
        "parent_role_id, rollup_description"),
}


def _sf_camel(name):
    # add_renamed_columns: Salesforce's own spelling, each '_'-separated part capitalized
    return "".join(part.capitalize() for part in name.split("_"))


def _sf_column_list(obj):
    columns = [tuple(c.split(" ", 1)) for c in _SF_COLUMNS[obj].split(", ")]
    return columns + [(_sf_camel(n), t) for n, t in columns
                      if "fivetran" not in n and _sf_camel(n).lower() != n.lower()]


def _sf_fill(obj, source):
    # fivetran_utils.fill_staging_columns: each column of the list read from the source when it
    # has it (matched lower-cased), else a typed NULL
    present = {name.lower() for name in source}
    return ",\n        ".join(f"{n} as {n}" if n.lower() in present else f"cast(null as {t}) as {n}"
                              for n, t in _sf_column_list(obj))


def _sf_renames(obj):
    # salesforce.coalesce_rename: the Salesforce spelling coalesced with the snake_case one
    types = dict(_sf_column_list(obj))
    out = []
    for item in _SF_FINAL[obj].split(", "):
        key, _, datatype = item.partition(":")
        key, _, alias = key.partition(">")
        datatype, alias, camel = datatype or types[key], alias or key, _sf_camel(key)
        out.append(f"cast({camel} as {datatype}) as {alias}" if camel.lower() == key.lower() else
                   f"coalesce(cast({camel} as {datatype}),\n        cast({key} as {datatype}))\n"
                   f"        as {alias}")
    return ",\n        ".join(out)


def _sf_staging(obj, table, source, head="", tail=None):
    tail = "\nselect *\nfrom final\nwhere not coalesce(is_deleted, false)" if tail is None else tail
    base = ",\n        ".join(f"{expr} as {name}" for name, expr in source.items())
    return f"""
with base as (
    select
        {base}
    from {table}
),
fields as (
    select
        {_sf_fill(obj, source)}
    from base
),
final as (
    select
        {head}cast(_fivetran_synced as timestamp) as _fivetran_synced,
        {_sf_renames(obj)}
    from fields
    where coalesce(_fivetran_active, true)
){tail}"""
_SF_SYNCED = f"cast(date_add({_SF_AT}, id) as timestamp)"
_SF_HOUR = "timestamp'2024-01-01 00:00:00'"
_SF_OPPORTUNITY_TAIL = f""",

calculated as (

    select
        *,
        created_date >= date_trunc('month', {_SF_NOW}) as is_created_this_month,
        created_date >= date_trunc('quarter', {_SF_NOW}) as is_created_this_quarter,
        datediff({asserted('date', 'created_date')}, {asserted('date', _SF_NOW)}) as days_since_created,
        datediff({asserted('date', 'created_date')}, {asserted('date', 'close_date')}) as days_to_close,
        date_trunc('month', close_date) = date_trunc('month', {_SF_NOW}) as is_closed_this_month,
        date_trunc('quarter', close_date) = date_trunc('quarter', {_SF_NOW}) as is_closed_this_quarter
    from final
)

select *
from calculated
where not coalesce(is_deleted, false)"""
SF_STAGING = {
 "stg_account": _sf_staging("account", C, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "name": "name",
     "account_number": "concat('ACC-', id)",
     "account_source": "element_at(array('Web', 'Referral', 'Partner'), cast(id % 3 + 1 as int))",
     "annual_revenue": "cast(id * 1000 as float)", "billing_state": "region",
     "description": "concat('account ', name)",
     "industry": "case region when 'eu' then 'Retail' when 'us' then 'Technology' "
                 "when 'apac' then 'Manufacturing' end",
     "is_deleted": "tier = 'blocked' and id % 20 = 0", "number_of_employees": "id * 10",
     "owner_id": "id % 12 + 1", "parent_id": "case when id % 5 = 0 then id - 1 end",
     "rating": "case id % 4 when 0 then 'Hot' when 1 then 'Warm' when 2 then 'Cold' end",
     "type": "case when tier = 'blocked' then 'Former Customer' else 'Customer' end"}),
 "stg_contact": _sf_staging("contact", C, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "name": "name", "first_name": "name",
     "last_name": "concat('C', id)", "account_id": "(id * 3) % 45 + 1", "owner_id": "id % 12 + 1",
     "department": "tier", "description": "concat('contact in ', region)",
     "email": "concat(name, '@mail.test')", "individual_id": "concat('IND-', id)",
     "is_deleted": "case when tier = 'blocked' and id % 3 = 0 then true end",
     "last_activity_date": f"cast(date_add({_SF_AT}, id * 2) as timestamp)",
     "lead_source": "element_at(array('Web', 'Phone Inquiry', 'Partner Referral'), cast(id % 3 + 1 as int))",
     "mailing_city": "region", "mailing_country": "case when region = 'us' then 'United States' end",
     "mailing_state": "upper(region)", "mobile_phone": "concat('555-', id)", "phone": "concat('556-', id)",
     "reports_to_id": "case when id > 5 then id - 5 end", "title": "case when id % 7 = 0 then 'VP' end"}),
 "stg_event": _sf_staging("event", O, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "account_id": "customer_id", "what_id": "id",
     "owner_id": "product_id",
     "activity_date": f"case when status <> 'new' then cast(date_add({_SF_AT}, id + 2) as timestamp) end",
     "activity_date_time": f"dateadd(HOUR, id * 5, {_SF_HOUR})",
     "start_date_time": f"dateadd(HOUR, id * 5, {_SF_HOUR})",
     "end_date_time": f"dateadd(HOUR, id * 5 + 1, {_SF_HOUR})",
     "created_date": f"cast(date_add({_SF_AT}, id) as timestamp)", "subject": "concat('Meeting: ', status)",
     "type": "status", "location": "case when amount > 60 then 'Onsite' else 'Remote' end",
     "is_deleted": "status = 'cancelled' and amount is null"}),
 "stg_lead": _sf_staging("lead", C, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "name": "name", "company": "concat(name, ' Inc')",
     "created_date": f"cast(date_add({_SF_AT}, id * 3) as timestamp)",
     "is_converted": "region <> 'apac'",
     "converted_date": f"case when region <> 'apac' then "
                       f"cast(date_add({_SF_AT}, id * 3 + id % 20) as timestamp) end",
     "converted_account_id": "case when region <> 'apac' then id end",
     "status": "case when region <> 'apac' then 'Closed - Converted' else 'Open - Not Contacted' end",
     "owner_id": "id % 12 + 1", "email": "concat(name, '@lead.test')", "city": "region",
     "industry": "tier", "annual_revenue": "cast(id * 500 as float)", "number_of_employees": "id * 3",
     "lead_source": "'Web'", "is_deleted": "case when id % 13 = 0 then true end"}),
 "stg_opportunity": _sf_staging("opportunity", O, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "account_id": "customer_id",
     "owner_id": "(customer_id + product_id) % 12 + 1",
     "amount": "cast(amount as float)", "name": "concat('Opportunity ', id)",
     "stage_name": "case status when 'new' then 'Prospecting' when 'shipped' then 'Negotiation/Review' "
                   "when 'paid' then 'Closed Won' else 'Closed Lost' end",
     "is_won": "status = 'paid'", "is_closed": "status in ('paid', 'cancelled')",
     "forecast_category": "case status when 'new' then case when id % 3 = 0 then 'Omitted' "
                          "else 'Pipeline' end when 'shipped' then case when id % 2 = 0 then 'Forecast' else 'BestCase' end "
                          "when 'paid' then 'Closed' else 'Omitted' end",
     "probability": "case status when 'new' then 10 when 'shipped' then 75 when 'paid' then 100 else 0 end",
     "created_date": f"cast(date_add({_SF_AT}, id) as timestamp)",
     "close_date": f"cast(date_add({_SF_AT}, id + id % 45) as timestamp)",
     "fiscal_year": f"year(date_add({_SF_AT}, id + id % 45))",
     "fiscal_quarter": f"quarter(date_add({_SF_AT}, id + id % 45))",
     "type": "element_at(array('New Business', 'Existing Business', 'Renewal'), cast(id % 3 + 1 as int))",
     "lead_source": "case when id % 4 = 0 then 'Web' end",
     "is_deleted": "case when id % 25 = 0 then true end"}, tail=_SF_OPPORTUNITY_TAIL),
 "stg_opportunity_line_item": _sf_staging("opportunity_line_item", P, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "opportunity_id": "order_id",
     "product_2_id": "(id * 7) % 12 + 1", "pricebook_entry_id": "concat('PBE-', (id * 7) % 12 + 1)",
     "name": "concat(method, ' line')", "description": "concat('line ', id)",
     "created_date": f"dateadd(HOUR, id, {_SF_HOUR})",
     "last_modified_date": f"dateadd(HOUR, id + 5, {_SF_HOUR})",
     "service_date": f"cast(date_add({_SF_AT}, id % 90) as timestamp)",
     "quantity": "cast(amount % 5 + 1 as float)", "unit_price": "cast(amount as float)",
     "list_price": "cast(amount + 5 as float)", "total_price": "cast(amount * (amount % 5 + 1) as float)",
     "has_quantity_schedule": "amount % 2 = 0", "has_revenue_schedule": "method = 'bank'",
     "is_deleted": "method = 'void' and id % 2 = 0"}),
 "stg_order": _sf_staging("order", O, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "account_id": "customer_id", "opportunity_id": "id",
     "owner_id": "product_id", "status": "case status when 'paid' then 'Activated' else 'Draft' end",
     "total_amount": "cast(amount as float)", "created_date": f"cast(date_add({_SF_AT}, id) as timestamp)",
     "activated_date": f"case when status = 'paid' then cast(date_add({_SF_AT}, id + 1) as timestamp) end",
     "order_number": "lpad(cast(id as string), 8, '0')", "description": "concat('order ', id)",
     "type": "'Standard'", "is_deleted": "status = 'cancelled'"}),
 "stg_product_2": _sf_staging("product_2", PR, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "name": "concat('Product ', id)",
     "product_code": "concat('P-', id)", "description": "category", "family": "category",
     "external_id": "concat('EXT-', id)", "is_active": "price > 10", "is_archived": "price > 50",
     "is_deleted": "category = 'cat3'", "created_date": f"cast(date_add({_SF_AT}, id) as timestamp)",
     "number_of_quantity_installments": "price % 4",
     "quantity_installment_period": "case when price % 4 > 0 then 'Monthly' end",
     "quantity_schedule_type": "case when price % 4 > 0 then 'Divide' end",
     "quantity_unit_of_measure": "'Each'", "number_of_revenue_installments": "price % 3",
     "revenue_installment_period": "case when price % 3 > 0 then 'Quarterly' end",
     "revenue_schedule_type": "case when price % 3 > 0 then 'Repeat' end"}),
 "stg_task": _sf_staging("task", P, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "what_id": "order_id", "owner_id": "id % 12 + 1",
     "activity_date": f"cast(date_add({_SF_AT}, order_id) as timestamp)",
     "created_date": f"dateadd(HOUR, id, {_SF_HOUR})", "subject": "concat('Call about ', order_id)",
     "description": "method", "status": "case when method = 'void' then 'Open' else 'Completed' end",
     "is_closed": "method <> 'void'", "priority": "case when amount > 40 then 'High' else 'Normal' end",
     "is_high_priority": "amount > 40", "type": "'Call'", "task_subtype": "'Call'",
     "call_duration_in_seconds": "amount * 10", "is_deleted": "case when id % 17 = 0 then true end"}),
 "stg_user": _sf_staging("user", C, {
     "Id": "id", "_fivetran_synced": _SF_SYNCED, "_fivetran_deleted": "tier = 'blocked'", "Name": "name",
     "FirstName": "name", "LastName": "concat('L', id)", "Alias": "concat('u', id)", "City": "region",
     "State": "upper(tier)", "Department": "region", "Email": "concat(name, '@example.com')",
     "Username": "lower(name)", "IsActive": "tier <> 'blocked'",
     "ManagerId": "case when id > 3 then id % 3 + 1 end", "UserRoleId": "id % 4 + 1",
     "Title": "case when id <= 3 then 'Sales Manager' else 'Account Executive' end",
     "UserType": "'Standard'"}, head="_fivetran_deleted,\n        ", tail="\nselect *\nfrom final"),
 "stg_user_role": _sf_staging("user_role", PR, {
     "id": "id", "_fivetran_synced": _SF_SYNCED, "_fivetran_deleted": "category is null",
     "name": "category", "developer_name": "concat('ROLE_', id)",
     "parent_role_id": "case when id > 1 then cast(id / 2 as int) end",
     "rollup_description": "concat(category, ' rollup')",
     "opportunity_access_for_account_owner": "case when price > 15 then 'Edit' else 'Read' end"},
     head="_fivetran_deleted,\n        ", tail="\nselect *\nfrom final"),
}
SF_MARTS = {
 "int_date_spine": f"""
-- depends_on: {{{{ ref('PFX_stg_lead') }}}}
with spine as (

with rawdata as (

    with p as (
        select 0 as generated_number union all select 1
    ), unioned as (

    select
    {(chr(10) + '    + ').join(f"p{i}.generated_number * power(2, {i})" for i in range(9))}
    + 1
    as generated_number

    from
    {(chr(10) + '    cross join ').join(f"p as p{i}" for i in range(9))}

    )

    select *
    from unioned
    where generated_number <= 366
    order by generated_number

),

all_periods as (

    select (
        {dbt_dateadd('day', 'row_number() over (order by generated_number) - 1', "cast('2024-01-01' as date)")}
    ) as date_day
    from rawdata

),

filtered as (

    select *
    from all_periods
    where date_day <= {dbt_dateadd('day', '1', "cast('2024-12-31' as date)")}

)

select * from filtered

)

select *
from spine""",
 "opportunity_enhanced": """
with opportunity as (

    select *
    from {{ ref('PFX_stg_opportunity') }}
),

salesforce_user as (

    select *
    from {{ ref('PFX_stg_user') }}
),

-- If using user_role table, the following will be included, otherwise it will not.
user_role as (

    select *
    from {{ ref('PFX_stg_user_role') }}
),

account as (

    select *
    from {{ ref('PFX_stg_account') }}
),

add_fields as (

    select
        opportunity.*,
        account.account_number,
        account.account_source,
        account.industry,
        account.account_name,
        account.number_of_employees,
        account.type as account_type,
        opportunity_owner.user_id as opportunity_owner_id,
        opportunity_owner.user_name as opportunity_owner_name,
        opportunity_owner.user_role_id as opportunity_owner_role_id,
        opportunity_owner.city opportunity_owner_city,
        opportunity_owner.state as opportunity_owner_state,
        opportunity_manager.user_id as opportunity_manager_id,
        opportunity_manager.user_name as opportunity_manager_name,
        opportunity_manager.city opportunity_manager_city,
        opportunity_manager.state as opportunity_manager_state,

        -- If using user_role table, the following will be included, otherwise it will not.
        user_role.user_role_name as opportunity_owner_position,
        user_role.developer_name as opportunity_owner_developer_name,
        user_role.parent_role_id as opportunity_owner_parent_role_id,
        user_role.rollup_description as opportunity_owner_rollup_description,

        case
            when opportunity.is_won then 'Won'
            when not opportunity.is_won and opportunity.is_closed then 'Lost'
            when not opportunity.is_closed and lower(opportunity.forecast_category) in ('pipeline','forecast','bestcase') then 'Pipeline'
            else 'Other'
        end as status,
        case when is_created_this_month then amount else 0 end as created_amount_this_month,
        case when is_created_this_quarter then amount else 0 end as created_amount_this_quarter,
        case when is_created_this_month then 1 else 0 end as created_count_this_month,
        case when is_created_this_quarter then 1 else 0 end as created_count_this_quarter,
        case when is_closed_this_month then amount else 0 end as closed_amount_this_month,
        case when is_closed_this_quarter then amount else 0 end as closed_amount_this_quarter,
        case when is_closed_this_month then 1 else 0 end as closed_count_this_month,
        case when is_closed_this_quarter then 1 else 0 end as closed_count_this_quarter

        --The below script allows for pass through columns.

        -- If using user_role table, the following will be included, otherwise it will not.

    from opportunity
    left join account
        on opportunity.account_id = account.account_id
    left join salesforce_user as opportunity_owner
        on opportunity.owner_id = opportunity_owner.user_id
    left join salesforce_user as opportunity_manager
        on opportunity_owner.manager_id = opportunity_manager.user_id

    -- If using user_role table, the following will be included, otherwise it will not.
    left join user_role
        on opportunity_owner.user_role_id = user_role.user_role_id
)

select *
from add_fields""",
 "int_opportunity_aggregation_by_owner": """
with salesforce_opportunity_enhanced as (

    select *
    from {{ ref('PFX_opportunity_enhanced') }}
),

salesforce_user as (

    select *
    from {{ ref('PFX_stg_user') }}
),

booking_by_owner as (

    select
        opportunity_manager_id as b_manager_id,
        opportunity_owner_id as b_owner_id,
        round(sum(closed_amount_this_month)) as bookings_amount_closed_this_month,
        round(sum(closed_amount_this_quarter)) as bookings_amount_closed_this_quarter,
        count(*) as total_number_bookings,
        round(sum(amount)) as total_bookings_amount,
        sum(closed_count_this_month) as bookings_count_closed_this_month,
        sum(closed_count_this_quarter) as bookings_count_closed_this_quarter,
        round(avg(amount)) as avg_bookings_amount,
        max(amount) as largest_booking,
        avg(days_to_close) as avg_days_to_close
    from salesforce_opportunity_enhanced
    where status = 'Won'
    group by 1, 2
),

lost_by_owner as (

    select
        opportunity_manager_id as l_manager_id,
        opportunity_owner_id as l_owner_id,
        round(sum(closed_amount_this_month)) as lost_amount_this_month,
        round(sum(closed_amount_this_quarter)) as lost_amount_this_quarter,
        count(*) as total_number_lost,
        round(sum(amount)) as total_lost_amount,
        sum(closed_count_this_month) as lost_count_this_month,
        sum(closed_count_this_quarter) as lost_count_this_quarter
    from salesforce_opportunity_enhanced
    where status = 'Lost'
    group by 1, 2
),

pipeline_by_owner as (

    select
        opportunity_manager_id as p_manager_id,
        opportunity_owner_id as p_owner_id,
        round(sum(created_amount_this_month)) as pipeline_created_amount_this_month,
        round(sum(created_amount_this_quarter)) as pipeline_created_amount_this_quarter,
        round(sum(created_amount_this_month * probability)) as pipeline_created_forecast_amount_this_month,
        round(sum(created_amount_this_quarter * probability)) as pipeline_created_forecast_amount_this_quarter,
        sum(created_count_this_month) as pipeline_count_created_this_month,
        sum(created_count_this_quarter) as pipeline_count_created_this_quarter,
        count(*) as total_number_pipeline,
        round(sum(amount)) as total_pipeline_amount,
        round(sum(amount * probability)) as total_pipeline_forecast_amount,
        round(avg(amount)) as avg_pipeline_opp_amount,
        max(amount) as largest_deal_in_pipeline,
        avg(days_since_created) as avg_days_open
    from salesforce_opportunity_enhanced
    where status = 'Pipeline'
    group by 1, 2
)

select
    salesforce_user.user_id as owner_id,
    coalesce(p_manager_id, b_manager_id, l_manager_id) as manager_id,
    booking_by_owner.*,
    lost_by_owner.*,
    pipeline_by_owner.*
from salesforce_user
left join booking_by_owner
    on booking_by_owner.b_owner_id = salesforce_user.user_id
left join lost_by_owner
    on lost_by_owner.l_owner_id = salesforce_user.user_id
left join pipeline_by_owner
    on pipeline_by_owner.p_owner_id = salesforce_user.user_id""",
 "owner_performance": """
with opportunity_aggregation_by_owner as (

    select *
    from {{ ref('PFX_int_opportunity_aggregation_by_owner') }}
),

salesforce_user as (

    select *
    from {{ ref('PFX_stg_user') }}
)

select
    opportunity_aggregation_by_owner.*,
    salesforce_user.user_name as owner_name,
    salesforce_user.city as owner_city,
    salesforce_user.state as owner_state,
    case
        when (bookings_amount_closed_this_month + lost_amount_this_month) > 0
            then bookings_amount_closed_this_month / (bookings_amount_closed_this_month + lost_amount_this_month) * 100
        else 0
    end as win_percent_this_month,
    case
        when (bookings_amount_closed_this_quarter + lost_amount_this_quarter) > 0
            then bookings_amount_closed_this_quarter / (bookings_amount_closed_this_quarter + lost_amount_this_quarter) * 100
        else 0
    end as win_percent_this_quarter,
    case
        when (total_bookings_amount + total_lost_amount) > 0
            then total_bookings_amount / (total_bookings_amount + total_lost_amount) * 100
        else 0
    end as total_win_percent
from opportunity_aggregation_by_owner
join salesforce_user
    on salesforce_user.user_id = opportunity_aggregation_by_owner.owner_id""",
 "manager_performance": """
with opportunity_aggregation_by_owner as (

    select *
    from {{ ref('PFX_int_opportunity_aggregation_by_owner') }}
),

-- If using user_role table, the following will be included, otherwise it will not.
user_role as (

    select *
    from {{ ref('PFX_stg_user_role') }}
),

salesforce_user as (

    select *
    from {{ ref('PFX_stg_user') }}
)

select
    coalesce(manager.user_id, 'No Manager Assigned') as manager_id,
    coalesce(manager.user_name, 'No Manager Assigned') as manager_name,
    manager.city as manager_city,
    manager.state as manager_state,

    -- If using user_role table, the following will be included, otherwise it will not.
    user_role.user_role_name as manager_position,

    count(distinct owner_id) as number_of_direct_reports,
    coalesce(sum(bookings_amount_closed_this_month), 0) as bookings_amount_closed_this_month,
    coalesce(sum(bookings_amount_closed_this_quarter), 0) as bookings_amount_closed_this_quarter,
    coalesce(sum(total_number_bookings), 0) as total_number_bookings,
    coalesce(sum(total_bookings_amount), 0) as total_bookings_amount,
    coalesce(sum(bookings_count_closed_this_month), 0) as bookings_count_closed_this_month,
    coalesce(sum(bookings_count_closed_this_quarter), 0) as bookings_count_closed_this_quarter,
    coalesce(max(largest_booking), 0) as largest_booking,
    coalesce(sum(lost_amount_this_month), 0) as lost_amount_this_month,
    coalesce(sum(lost_amount_this_quarter), 0) as lost_amount_this_quarter,
    coalesce(sum(total_number_lost), 0) as total_number_lost,
    coalesce(sum(total_lost_amount), 0) as total_lost_amount,
    coalesce(sum(lost_count_this_month), 0) as lost_count_this_month,
    coalesce(sum(lost_count_this_quarter), 0) as lost_count_this_quarter,
    coalesce(sum(pipeline_created_amount_this_month), 0) as pipeline_created_amount_this_month,
    coalesce(sum(pipeline_created_amount_this_quarter), 0) as pipeline_created_amount_this_quarter,
    coalesce(sum(pipeline_created_forecast_amount_this_month), 0) as pipeline_created_forecast_amount_this_month,
    coalesce(sum(pipeline_created_forecast_amount_this_quarter), 0) as pipeline_created_forecast_amount_this_quarter,
    coalesce(sum(pipeline_count_created_this_month), 0) as pipeline_count_created_this_month,
    coalesce(sum(pipeline_count_created_this_quarter), 0) as pipeline_count_created_this_quarter,
    coalesce(sum(total_number_pipeline), 0) as total_number_pipeline,
    coalesce(sum(total_pipeline_amount), 0) as total_pipeline_amount,
    coalesce(sum(total_pipeline_forecast_amount), 0) as total_pipeline_forecast_amount,
    coalesce(max(largest_deal_in_pipeline), 0) as largest_deal_in_pipeline,
    round(case
        when sum(bookings_amount_closed_this_month + lost_amount_this_month) > 0 then
        sum(bookings_amount_closed_this_month) / sum(bookings_amount_closed_this_month + lost_amount_this_month) * 100
        else 0
    end, 2) as win_percent_this_month,
    round(case
        when sum(bookings_amount_closed_this_quarter + lost_amount_this_quarter) > 0 then
        sum(bookings_amount_closed_this_quarter) / sum(bookings_amount_closed_this_quarter + lost_amount_this_quarter) * 100
        else 0
    end, 2) as win_percent_this_quarter,
    round(case
        when sum(total_bookings_amount + total_lost_amount) > 0 then
        sum(total_bookings_amount) / sum(total_bookings_amount + total_lost_amount) * 100
        else 0
    end, 2) as total_win_percent

from opportunity_aggregation_by_owner
left join salesforce_user as manager
    on manager.user_id = opportunity_aggregation_by_owner.manager_id

-- If using user_role table, the following will be included, otherwise it will not.
left join user_role
    on manager.user_role_id = user_role.user_role_id

group by 1, 2, 3, 4, 5

having count(distinct owner_id) > 0""",
 "sales_snapshot": """
with salesforce_opportunity_enhanced as (

    select *
    from {{ ref('PFX_opportunity_enhanced') }}
),

pipeline as (

    select
        round(sum(created_amount_this_month)) as pipeline_created_amount_this_month,
        round(sum(created_amount_this_quarter)) as pipeline_created_amount_this_quarter,
        round(sum(created_amount_this_month * probability)) as pipeline_created_forecast_amount_this_month,
        round(sum(created_amount_this_quarter * probability)) as pipeline_created_forecast_amount_this_quarter,
        sum(created_count_this_month) as pipeline_count_created_this_month,
        sum(created_count_this_quarter) as pipeline_count_created_this_quarter,
        count(*) as total_number_pipeline,
        round(sum(amount)) as total_pipeline_amount,
        round(sum(amount * probability)) as total_pipeline_forecast_amount,
        round(avg(amount)) as avg_pipeline_opp_amount,
        max(amount) as largest_deal_in_pipeline,
        avg(days_since_created) as avg_days_open
    from salesforce_opportunity_enhanced
    where status = 'Pipeline'
),

bookings as (

    select
        round(sum(closed_amount_this_month)) as bookings_amount_closed_this_month,
        round(sum(closed_amount_this_quarter)) as bookings_amount_closed_this_quarter,
        count(*) as total_number_bookings,
        round(sum(amount)) as total_bookings_amount,
        sum(closed_count_this_month) as bookings_count_closed_this_month,
        sum(closed_count_this_quarter) as bookings_count_closed_this_quarter,
        round(avg(amount)) as avg_bookings_amount,
        max(amount) as largest_booking,
        avg(days_to_close) as avg_days_to_close
    from salesforce_opportunity_enhanced
    where status = 'Won'
),

lost as (

    select
        round(sum(closed_amount_this_month)) as lost_amount_this_month,
        round(sum(closed_amount_this_quarter)) as lost_amount_this_quarter,
        count(*) as total_number_lost,
        round(sum(amount)) as total_lost_amount,
        sum(closed_count_this_month) as lost_count_this_month,
        sum(closed_count_this_quarter) as lost_count_this_quarter
    from salesforce_opportunity_enhanced
    where status = 'Lost'
)

select
    bookings.*,
    pipeline.*,
    lost.*,
    case
        when (bookings.bookings_amount_closed_this_month + lost.lost_amount_this_month) = 0 then null
        else round( (bookings.bookings_amount_closed_this_month / (bookings.bookings_amount_closed_this_month + lost.lost_amount_this_month) ) * 100, 2 )
    end as win_percent_this_month,
    case
        when (bookings.bookings_amount_closed_this_quarter + lost.lost_amount_this_quarter) = 0 then null
        else round( (bookings.bookings_amount_closed_this_quarter / (bookings.bookings_amount_closed_this_quarter + lost.lost_amount_this_quarter) ) * 100, 2 )
    end as win_percent_this_quarter,
    case
        when (bookings.total_bookings_amount + lost.total_lost_amount) = 0 then null
        else round( (bookings.total_bookings_amount / (bookings.total_bookings_amount + lost.total_lost_amount) ) * 100, 2)
    end as total_win_percent
from bookings, pipeline, lost""",
 "contact_enhanced": """
with contact as (

    select *
    from {{ ref('PFX_stg_contact') }}
),

account as (

    select *
    from {{ ref('PFX_stg_account') }}
),

salesforce_user as (

    select *
    from {{ ref('PFX_stg_user') }}
)

select
    contact.contact_id,
    contact.contact_name,
    contact.account_id,
    contact.department,
    contact.contact_description,
    contact.email,
    contact.individual_id,
    contact.is_deleted as contact_is_deleted,
    contact.last_activity_date,
    contact.lead_source,
    contact.mailing_city,
    contact.mailing_country,
    contact.mailing_country_code,
    contact.mailing_postal_code,
    contact.mailing_state,
    contact.mailing_state_code,
    contact.mailing_street,
    contact.master_record_id,
    contact.mobile_phone,
    contact.owner_id as contact_owner_id,
    contact.phone,
    contact.reports_to_id,
    salesforce_user.user_name as contact_owner_name,
    account.account_name,
    account.account_number,
    account.account_source,
    account.annual_revenue as account_annual_revenue,
    account.account_description,
    account.industry as account_industry,
    account.is_deleted as account_is_deleted,
    account.number_of_employees as account_number_of_employees,
    account.owner_id as account_owner_id,
    account.parent_id as account_parent_id,
    account.rating as account_rating,
    account.type as account_type

        --The below scripts allows for pass through columns.

from contact
left join account
    on contact.account_id = account.account_id
left join salesforce_user
    on contact.owner_id = salesforce_user.user_id""",
 "opportunity_line_item_enhanced": """
--This model will only run if you have the underlying opportunity line item table.
with opportunity_line_item as (

    select *
    from {{ ref('PFX_stg_opportunity_line_item') }}
),

-- If using product_2 table, the following will be included, otherwise it will not.
product_2 as (

    select *
    from {{ ref('PFX_stg_product_2') }}
),

final as (

    select
        oli.opportunity_line_item_id,
        oli.opportunity_line_item_name,
        oli.opportunity_line_item_description,
        oli.opportunity_id,
        row_number() over (partition by oli.opportunity_id order by oli.created_date) as line_item_index,
        count(opportunity_line_item_id) over (partition by oli.opportunity_id) as total_line_items,
        oli.created_date,
        oli.last_modified_date,
        oli.service_date,
        oli.pricebook_entry_id,
        oli.product_2_id,
        oli.list_price,
        oli.quantity,
        oli.unit_price,
        oli.total_price,
        oli.has_quantity_schedule,
        oli.has_revenue_schedule

        ,
        product_2.product_2_name,
        product_2.product_code,
        product_2.product_2_description,
        product_2.external_id as product_external_id,
        product_2.family as product_family,
        product_2.is_active as product_is_active,
        product_2.is_archived as product_is_archived,
        product_2.is_deleted as product_is_deleted,
        product_2.number_of_quantity_installments as product_number_of_quantity_installments,
        product_2.quantity_installment_period as product_quantity_installment_period,
        product_2.quantity_schedule_type as product_quantity_schedule_type,
        product_2.quantity_unit_of_measure as product_quantity_unit_of_measure,
        product_2.number_of_revenue_installments as product_number_of_revenue_installments,
        product_2.revenue_installment_period as product_revenue_installment_period,
        product_2.revenue_schedule_type as product_revenue_schedule_type

        --The below script allows for pass through columns.

    from opportunity_line_item as oli

    left join product_2
        on oli.product_2_id = product_2.product_2_id
)

select *
from final""",
 "daily_activity": """
with date_spine as (

    select
        date_trunc('day', date_day) as date_day
    from {{ ref('PFX_int_date_spine') }}
),

task as (

    select
        date_trunc('day', activity_date) as activity_date,
        count(task_id) as tasks_completed
    from {{ ref('PFX_stg_task') }}
    group by 1
),

salesforce_event as (

    select
        coalesce(date_trunc('day', activity_date), date_trunc('day', activity_date_time)) as activity_date,
        count(event_id) as events_completed
    from {{ ref('PFX_stg_event') }}
    group by 1
),

salesforce_lead as (

    select
        date_trunc('day', created_date) as created_date,
        count(lead_id) as leads_created
    from {{ ref('PFX_stg_lead') }}
    group by 1
),

salesforce_converted_lead as (

    select
        date_trunc('day', converted_date) as converted_date,
        count(lead_id) as leads_converted
    from {{ ref('PFX_stg_lead') }}
    where is_converted
    group by 1
),

opportunity as (

    select
        opportunity_id,
        date_trunc('day', created_date) as created_date,
        account_id,
        date_trunc('day', close_date) as close_date,
        is_closed,
        is_deleted,
        is_won,
        owner_id,
        stage_name,
        type,
        amount,
        case
            when is_won then 'Won'
            when not is_won and is_closed then 'Lost'
            when not is_closed and lower(forecast_category) in ('pipeline','forecast','bestcase') then 'Pipeline'
            else 'Other'
        end as status
    from {{ ref('PFX_stg_opportunity') }}
),

opportunities_created as (

    select
        created_date,
        count(opportunity_id) as opportunities_created,
        round(sum(amount)) as opportunities_created_amount
    from opportunity
    group by 1
),

opportunities_closed as (

    select
        close_date,
        count(case when status = 'Won' then opportunity_id else null end) as opportunities_won,
        round(sum(case when status = 'Won' then amount else 0 end)) as opportunities_won_amount,
        count(case when status = 'Lost' then opportunity_id else null end) as opportunities_lost,
        round(sum(case when status = 'Lost' then amount else null end)) as opportunities_lost_amount,
        round(sum(case when status = 'Pipeline' then amount else null end)) as pipeline_amount
    from opportunity
    group by 1
)

select
    date_spine.date_day,

    salesforce_lead.leads_created,
    salesforce_converted_lead.leads_converted,

    task.tasks_completed,

    salesforce_event.events_completed,

    opportunities_created.opportunities_created,
    opportunities_created.opportunities_created_amount,
    opportunities_closed.opportunities_won,
    opportunities_closed.opportunities_won_amount,
    opportunities_closed.opportunities_lost,
    opportunities_closed.opportunities_lost_amount,
    opportunities_closed.pipeline_amount
from date_spine

left join salesforce_lead
    on date_spine.date_day = salesforce_lead.created_date
left join salesforce_converted_lead
    on date_spine.date_day = salesforce_converted_lead.converted_date

left join task
    on date_spine.date_day = task.activity_date

left join salesforce_event
    on date_spine.date_day = salesforce_event.activity_date

left join opportunities_created
    on date_spine.date_day = opportunities_created.created_date
left join opportunities_closed
    on date_spine.date_day = opportunities_closed.close_date""",

}
# the package's yml files: unique + not_null on each staging model's id and each end model's id
SF_IDS = {"stg_account": "account_id", "stg_contact": "contact_id", "stg_event": "event_id",
          "stg_lead": "lead_id", "stg_opportunity": "opportunity_id",
          "stg_opportunity_line_item": "opportunity_line_item_id", "stg_order": "order_id",
          "stg_product_2": "product_2_id", "stg_task": "task_id", "stg_user": "user_id",
          "stg_user_role": "user_role_id", "opportunity_enhanced": "opportunity_id",
          "owner_performance": "owner_id", "manager_performance": "manager_id",
          "contact_enhanced": "contact_id", "daily_activity": "date_day",
          "opportunity_line_item_enhanced": "opportunity_line_item_id"}
PROBES, MODEL_TESTS = ported("sf", {**SF_STAGING, **SF_MARTS}, SF_IDS)
