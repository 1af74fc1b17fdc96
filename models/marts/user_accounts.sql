{#
    One row per user id known to the shop (gold.users, a Debezium stream) or the CRM
    (gold.crm_users, a DB2 stream): an example mart over two gold tables of different CDC
    formats, with the depth of each user's history from silver's change log. The CRM keys
    a user by id and tax code, so one id may have several CRM rows: they are summed.
#}
with

{# Spark resolves column names case-insensitively: USER_ID is user_id. #}
shop_users as (
    select * from {{ source('gold', 'users') }}
),

crm_users as (
    select * from {{ source('gold', 'crm_users') }}
),

user_changes as (
    select * from {{ ref('change_log') }}
    where table_name in ('users', 'crm_users')
),

crm_per_user as (
    select
        user_id,
        count(*) as crm_accounts,
        sum(coins) as crm_coins,
        max(_updated_at) as crm_updated_at
    from crm_users
    group by user_id
),

changed_users as (
    {# A truncate has the key '{}' and names no user. #}
    select cast(get_json_object(record_key, '$.USER_ID') as bigint) as user_id
    from user_changes
    where get_json_object(record_key, '$.USER_ID') is not null
),

changes_per_user as (
    select
        user_id,
        count(*) as changes_captured
    from changed_users
    group by user_id
),

accounts as (
    select
        coalesce(shop_users.user_id, crm_per_user.user_id) as user_id,
        shop_users.name as shop_name,
        shop_users.coins as shop_coins,
        coalesce(crm_per_user.crm_accounts, 0) as crm_accounts,
        crm_per_user.crm_coins,
        shop_users.user_id is not null as in_shop,
        crm_per_user.user_id is not null as in_crm,
        greatest(shop_users._updated_at, crm_per_user.crm_updated_at) as last_updated_at
    from shop_users
    full outer join crm_per_user on shop_users.user_id = crm_per_user.user_id
),

final as (
    select
        accounts.user_id,
        accounts.shop_name,
        accounts.shop_coins,
        accounts.crm_accounts,
        accounts.crm_coins,
        coalesce(accounts.shop_coins, 0) + coalesce(accounts.crm_coins, 0) as total_coins,
        accounts.in_shop,
        accounts.in_crm,
        coalesce(changes_per_user.changes_captured, 0) as changes_captured,
        accounts.last_updated_at
    from accounts
    left join changes_per_user on accounts.user_id = changes_per_user.user_id
)

select * from final
