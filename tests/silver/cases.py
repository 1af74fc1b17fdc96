"""Edge-case records per format for the silver tests: rejects beside valid records."""

from __future__ import annotations

import base64

from tests.silver.landing import record

E1 = "400cb092-00af-4e44-bdcb-1a0c536692bf"
E2 = "7d1f3c2e-5b0a-4c8e-9f61-2a4b8c9d0e11"
E3 = "0f9e8d7c-6b5a-4938-8271-605f4e3d2c1b"
CLIENT = "c297cf20-18bd-40e2-827d-9b563ca28ccd"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def db2() -> list[dict]:
    t = "crm.DB2INST1.USERS"
    return [
        # null key and an image without TAX_CODE: the key cannot be built
        record(t, 100, None, {"USER_ID": 126, "NAME": "No Tax", "COINS": 1}),
        # a delete needs its key
        record(t, 101, None, None),
        # USER_ID is declared bigint; TAX_CODE a string, not a list
        record(t, 102, {"USER_ID": "abc", "TAX_CODE": "X"}, {"USER_ID": "abc", "TAX_CODE": "X"}),
        record(t, 103, {"USER_ID": 127, "TAX_CODE": ["A", "B"]}, {"USER_ID": 127, "NAME": "L"}),
    ]


def goldengate() -> list[dict]:
    t = "erp.ORDER_LINES"

    def gg(offset: int, key: str, op: str | None, pos: int, before, after) -> dict:
        value = {
            "table": "ERP.ORDER_LINES",
            "op_type": op,
            "before": before,
            "after": after,
            "pos": pos,
        }
        if op is None:
            del value["op_type"]
        return record(t, offset, key, value)

    b2 = {"ORDER_ID": 1004, "LINE_CODE": "B_2", "QTY": 1, "PRICE": 2}
    return [
        gg(100, "1004_B_2", "I", 200, None, b2),
        gg(101, "1005_X_Y_Z", "D", 201, None, None),
        gg(102, "9_9", "I", 202, None, {"ORDER_ID": 1006, "LINE_CODE": "C", "QTY": 1, "PRICE": 1}),
        gg(
            103,
            "1007_D",
            None,
            203,
            None,
            {"ORDER_ID": 1007, "LINE_CODE": "D", "QTY": 1, "PRICE": 1},
        ),
        gg(104, "1008_E", "T", 204, None, None),
        # out of order: an older position arrives after a newer one
        gg(105, "1004_B_2", "U", 199, b2, {**b2, "QTY": 7}),
        # ORDER_ID is declared bigint: from the split key string, and from the image
        gg(106, "x1009_F", "D", 205, None, None),
        gg(
            107,
            "1010.5_G",
            "I",
            206,
            None,
            {"ORDER_ID": 1010.5, "LINE_CODE": "G", "QTY": 1, "PRICE": 1},
        ),
    ]


def opencdc() -> list[dict]:
    t = "conduit.inventory.products"
    meta = {"opencdc.collection": "products", "opencdc.createdAt": "1663858200000000000"}
    return [
        record(
            t,
            100,
            b64("7"),
            {
                "position": b64("wal:0/16B3900"),
                "metadata": meta,
                "key": b64("7"),
                "payload": {"before": None, "after": {"id": 7}},
            },
        ),
        record(
            t,
            101,
            b64("8"),
            {
                "position": b64("snapshot:products:8"),
                "operation": "snapshot",
                "metadata": meta,
                "key": b64("8"),
                "payload": {
                    "before": None,
                    "after": {"id": 8, "name": "pear", "price": 2, "in_stock": True},
                },
            },
        ),
        # id is declared bigint
        record(
            t,
            102,
            {"id": "seven"},
            {
                "position": b64("wal:0/16B3A00"),
                "operation": "create",
                "metadata": meta,
                "key": {"id": "seven"},
                "payload": {"before": None, "after": {"id": "seven", "name": "x"}},
            },
        ),
        # a number Spark's parser would change, inside a base64 payload
        record(
            t,
            103,
            b64("9"),
            {
                "position": b64("wal:0/16B3B00"),
                "operation": "create",
                "metadata": meta,
                "key": b64("9"),
                "payload": {
                    "before": None,
                    "after": b64('{"id":9,"price":12.345678901234567890123}'),
                },
            },
        ),
        # a field named twice inside a base64 payload
        record(
            t,
            104,
            b64("10"),
            {
                "position": b64("wal:0/16B3C00"),
                "operation": "create",
                "metadata": meta,
                "key": b64("10"),
                "payload": {"before": None, "after": b64('{"id":10,"name":"a","name":"b"}')},
            },
        ),
    ]


def tigergraph() -> list[dict]:
    t = "tigergraph.social.cdc"

    def vertex(offset: int, mid: str, typename: str, operator: str, content: dict, **extra) -> dict:
        value = {
            "mid": mid,
            "operator": operator,
            "timestamp": int(mid.split("|")[1]),
            "type": "vertex",
            "typename": typename,
            **extra,
            "content": content,
        }
        return record(t, offset, None, value)

    return [
        vertex(
            100,
            "1|1701548849000|1",
            "Person",
            "insert",
            {"age": {"op": "Overwrite", "value": 1}},
            uid="person9",
        ),
        vertex(
            101, "1|1701548860000|9|0", "Person", "insert", {"age": {"op": "Overwrite", "value": 2}}
        ),
        vertex(
            102,
            "1|1701548861000|10|0",
            "Planet",
            "insert",
            {"name": {"op": "Overwrite", "value": "Mars"}},
            uid="p1",
        ),
        # older than person1's creation in the samples, delivered after it
        vertex(
            103,
            "1|1701548849800|1|1",
            "Person",
            "insert",
            {"age": {"op": "Overwrite", "value": 29}},
            uid="person1",
        ),
        vertex(
            104,
            "1|1701548862000|11|0",
            "Person",
            "upsert",
            {"age": {"op": "Overwrite", "value": 3}},
            uid="person1",
        ),
        # a uid must be scalar: a JSON object is rejected, a string that looks like one is not
        vertex(
            105,
            "1|1701548863000|12|0",
            "Person",
            "insert",
            {"age": {"op": "Overwrite", "value": 4}},
            uid={"id": "person1"},
        ),
        vertex(
            106,
            "1|1701548864000|13|0",
            "Tag",
            "insert",
            {"label": {"op": "Overwrite", "value": "braces"}},
            uid='{"id":"t9"}',
        ),
        record(
            t,
            107,
            None,
            {
                "mid": "1|1701548865000|14|0",
                "operator": "insert",
                "timestamp": 1701548865000,
                "type": "edge",
                "typename": "WorksAt",
                "from": {"type": "Person", "uid": ["person1", "person2"]},
                "to": {"type": "Company", "uid": "comp1"},
                "content": {"since": {"op": "Overwrite", "value": "2021-01-01"}},
            },
        ),
    ]


def debezium_patch() -> list[dict]:
    t = "my-db.entity-patches"

    def patch(offset: int, entity: str | list[str] | bool, request: int, ops: list[dict]) -> dict:
        return record(
            t,
            offset,
            entity,
            {
                "collection": "Contacts",
                "entity": entity,
                "clientid": CLIENT,
                "request": request,
                "begun": 1415747200000 + request,
                "part": 1,
                "parts": 1,
                "ops": ops,
            },
        )

    return [
        # one bad op rejects the whole patch
        patch(
            100,
            E3,
            6,
            [
                {"op": "add", "path": "firstName", "value": "Zed"},
                {"op": "move", "from": "a", "path": "b"},
            ],
        ),
        patch(101, E3, 7, [{"path": "lastName", "value": "Q"}]),
        patch(102, E2, 8, [{"op": "replace", "path": "age", "value": 42}]),
        # remove of the root path deletes the entity ...
        patch(103, E2, 9, [{"op": "remove", "path": ""}]),
        # ... also written "/"; ops after it re-create it from an empty document
        patch(
            104,
            E1,
            10,
            [
                {"op": "remove", "path": "/"},
                {"op": "add", "path": "firstName", "value": "Sal"},
            ],
        ),
        # only remove applies to the root path
        patch(105, E2, 11, [{"op": "add", "path": "", "value": {"firstName": "B"}}]),
        # the entity id is a JSON string or number, not a list
        patch(106, [E1, E2], 12, [{"op": "add", "path": "age", "value": 1}]),
        patch(107, True, 13, [{"op": "add", "path": "age", "value": 1}]),
        # an op written as a JSON string holding the op, with a number Spark would change
        patch(108, E3, 14, ['{"op":"add","path":"score","value":1e400}']),  # type: ignore[list-item]
        # ... and one naming a field twice
        patch(109, E3, 15, ['{"op":"add","path":"a","path":"b","value":1}']),  # type: ignore[list-item]
    ]


def pr_update() -> list[dict]:
    return [
        record(
            "test-tenant.PROD.food-delivery.pr_registry.pr-update",
            100,
            {"ID_USER": "u9"},
            {
                "operationType": "REPLACE",
                "operationTimestamp": "2022-05-20T11:00:00.000Z",
                "projectionName": "pr_registry",
                "primaryKeys": ["ID_USER"],
                "after": {"ID_USER": "u9"},
            },
        ),
        record(
            "gt.fd-test.DEV.inventory.pr_orders.pr-update",
            0,
            {"order_id": "o1"},
            {
                "operation": {"type": "INSERT", "timestamp": "2019-08-24T14:20:00Z"},
                "storageNamespace": "pr_orders",
                "primaryKeys": ["order_id"],
                "before": None,
                "after": {"order_id": "o1"},
            },
        ),
        # ID_USER is a string key: any scalar, not an object
        record(
            "test-tenant.PROD.food-delivery.pr_registry.pr-update",
            101,
            {"ID_USER": {"oid": "u10"}},
            {
                "operationType": "INSERT",
                "operationTimestamp": "2022-05-20T11:05:00.000Z",
                "projectionName": "pr_registry",
                "primaryKeys": ["ID_USER"],
                "after": {"ID_USER": {"oid": "u10"}, "NAME": "X"},
            },
        ),
    ]


def cassandra() -> list[dict]:
    t = "events.inventory.customers"
    key = {"id": 2001, "registration_date": 1562203000000}

    def cell(value) -> dict:
        return {"value": value, "deletion_ts": None, "set": True}

    source = {"keyspace": "inventory", "table": "customers", "file": "commitlog-7-2.log"}
    return [
        record(
            t,
            0,
            key,
            {
                "op": "i",
                "after": {
                    "id": cell(2001),
                    "registration_date": cell(1562203000000),
                    "first_name": cell("Eve"),
                },
                "source": {**source, "pos": 10, "ts_ms": 1562203000000100},
            },
        ),
        record(
            t,
            1,
            key,
            {
                "op": "u",
                "after": {
                    "id": cell(2001),
                    "registration_date": cell(1562203000000),
                    "first_name": "Evelyn",
                },
                "source": {**source, "pos": 20, "ts_ms": 1562203000000200},
            },
        ),
        # id is declared bigint
        record(
            t,
            2,
            {"id": "x-2002", "registration_date": 1562203000000},
            {
                "op": "i",
                "after": {"first_name": cell("Xavier")},
                "source": {**source, "pos": 30, "ts_ms": 1562203000000300},
            },
        ),
        # a cell naming its value twice (JSON text: a dict cannot hold it); Spark's JSON
        # functions would read the first
        record(
            t,
            3,
            key,
            '{"op":"u","after":{"first_name":{"value":"Ann","value":"Bo","deletion_ts":null,'
            '"set":true}},"source":{"keyspace":"inventory","table":"customers",'
            '"file":"commitlog-7-2.log","pos":40,"ts_ms":1562203000000400}}',
        ),
    ]


def debezium() -> list[dict]:
    t = "shop.public.users"
    source = {
        "version": "2.5.0.Final",
        "connector": "postgresql",
        "name": "shop",
        "snapshot": "false",
        "db": "shop",
        "schema": "public",
        "table": "users",
    }

    def event(offset: int, key, op: str, lsn: int, after=None, **fields) -> dict:
        ts = 1700000100000 + offset
        value = {
            "op": op,
            "before": None,
            "after": after,
            "source": {**source, "ts_ms": ts, "lsn": lsn},
            "ts_ms": ts + 3,
            **fields,
        }
        return record(t, offset, key, value)

    bad = {"USER_ID": "not-a-number-17", "TAX_CODE": "t", "NAME": "N", "COINS": 1}
    message_source = {**source, "ts_ms": 1700000100103, "lsn": 1130, "schema": "", "table": ""}
    return [
        # USER_ID is declared bigint: the key must cast
        event(100, {"USER_ID": "not-a-number-17"}, "c", 1100, bad),
        event(101, {"USER_ID": {"id": 126}}, "c", 1110, {**bad, "USER_ID": 126}),
        # TRUNCATE: no key, no images; the table comes from source
        record(
            t,
            102,
            None,
            {
                "op": "t",
                "source": {**source, "ts_ms": 1700000100102, "lsn": 1120, "txId": 120},
                "ts_ms": 1700000100105,
            },
        ),
        # logical decoding messages (pg_logical_emit_message): skipped, neither change
        # nor reject; one names an empty table, one (in the schema envelope) none at all
        record(
            "shop.message",
            103,
            {"prefix": "audit"},
            {
                "op": "m",
                "source": message_source,
                "message": {"prefix": "audit", "content": "aGVsbG8="},
                "ts_ms": 1700000100106,
            },
        ),
        record(
            "shop.message",
            104,
            {"schema": {"type": "struct"}, "payload": {"prefix": "audit"}},
            {
                "schema": {"type": "struct", "name": "io.debezium.connector.common.Message"},
                "payload": {
                    "op": "m",
                    "source": {
                        k: v for k, v in message_source.items() if k not in ("schema", "table")
                    },
                    "message": {"prefix": "audit", "content": "d29ybGQ="},
                    "ts_ms": 1700000100107,
                },
            },
        ),
        # an op code Debezium does not have is still a reject
        event(105, {"USER_ID": 123}, "x", 1140, None),
    ]


EDGE_CASES = {
    "shop_debezium": debezium,
    "crm_db2": db2,
    "erp_goldengate": goldengate,
    "inventory_opencdc": opencdc,
    "social_tigergraph": tigergraph,
    "contacts_entity_patches": debezium_patch,
    "fastdata_pr_update": pr_update,
    "inventory_cassandra": cassandra,
}
