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
    ]


def debezium_patch() -> list[dict]:
    t = "my-db.entity-patches"

    def patch(offset: int, entity: str, request: int, ops: list[dict]) -> dict:
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
    ]


EDGE_CASES = {
    "crm_db2": db2,
    "erp_goldengate": goldengate,
    "inventory_opencdc": opencdc,
    "social_tigergraph": tigergraph,
    "contacts_entity_patches": debezium_patch,
    "fastdata_pr_update": pr_update,
    "inventory_cassandra": cassandra,
}
