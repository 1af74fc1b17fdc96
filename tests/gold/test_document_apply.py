"""Entity-patch documents: add / remove / replace on slash paths, folded from history."""

from __future__ import annotations

from pyspark.sql import SparkSession

from pyspark_jobs.config import Entity, Source
from pyspark_jobs.gold.apply import apply_gold
from pyspark_jobs.gold.document_patch import fold_document
from tests.gold.changelog import append, change, config, create_change_log, rows

CONTACTS = Entity(
    "Contacts",
    "contacts",
    ("entity",),
    {
        "entity": "string",
        "firstName": "string",
        "lastName": "string",
        "phone": "json",
        "tags": "json",
    },
    kind="document",
)
PATCHES = Source("docs", "debezium_patch", (CONTACTS,), landing=None)
ID = "400cb092-00af-4e44-bdcb-1a0c536692bf"


def op(seq, kind, path, value=None, key=ID):
    return change(
        PATCHES, CONTACTS, {"entity": key}, "patch", seq, changes={path: (kind, value, None)}
    )


def events(*ops):
    return [
        {"op": "patch", "row_image": None, "changes": {p: {"op": o, "value": v}}} for o, p, v in ops
    ]


def test_nested_paths_lists_and_removes():
    assert fold_document(
        events(
            ("add", "tags", '["a","b"]'),
            ("add", "tags/1", "x"),
            ("add", "tags/-", "z"),
            ("remove", "tags/0", None),
            ("replace", "tags/0", '{"k":1}'),
            ("add", "phone/home/main", "1"),
            ("remove", "phone/none/x", None),
            ("remove", "lastName", None),
        )
    ) == (True, {"tags": '[{"k":1},"b","z"]', "phone": '{"home":{"main":1}}', "lastName": None})


def test_entity_patches_apply_in_order(spark: SparkSession, empty_lake):
    create_change_log(spark)
    begun = 1415747086227
    # The document's example: one batch request, three ops on one entity.
    append(
        spark,
        [
            op([begun, 2, 1, 0], "add", "firstName", "Sally"),
            op([begun, 2, 1, 1], "add", "lastName", "Anderson"),
            op([begun, 2, 1, 2], "add", "phone/home", "1-222-555-1234"),
            op([begun, 2, 1, 0], "add", "firstName", "Bob", key="other"),
        ],
    )
    apply_gold(spark, config(PATCHES), log=lambda _: None)
    cols = ["entity", "firstName", "lastName", "phone", "tags", "_seq"]
    assert rows(spark, "gold.contacts", cols) == [
        (ID, "Sally", "Anderson", '{"home":"1-222-555-1234"}', None, [begun, 2, 1, 2]),
        ("other", "Bob", None, None, None, [begun, 2, 1, 0]),
    ]
    # Later ops, plus a late one (request 2, op 3) that lands before request 3's replace.
    append(
        spark,
        [
            op([begun + 9, 3, 1, 0], "replace", "phone/home", "1-999"),
            op([begun, 2, 1, 3], "add", "phone/home", "late"),
            op([begun + 9, 3, 1, 1], "remove", "lastName"),
            op([begun + 9, 3, 1, 2], "add", "phone/work", "w"),
            change(PATCHES, CONTACTS, {"entity": "other"}, "delete", [begun + 9, 3, 1, 3]),
        ],
    )
    apply_gold(spark, config(PATCHES), log=lambda _: None)
    assert rows(spark, "gold.contacts", cols) == [
        (ID, "Sally", None, '{"home":"1-999","work":"w"}', None, [begun + 9, 3, 1, 2]),
    ]


def test_root_remove_deletes_and_a_later_patch_starts_a_new_document(
    spark: SparkSession, empty_lake
):
    # Silver turns a `remove` of the root path ("" or "/") into a delete of the entity.
    create_change_log(spark)
    delete = change(PATCHES, CONTACTS, {"entity": ID}, "delete", [300, 1, 1, 0])
    append(
        spark,
        [
            op([100, 1, 1, 0], "add", "firstName", "Sally"),
            op([100, 1, 1, 1], "add", "tags", '["a"]'),
            op([200, 1, 1, 0], "add", "firstName", "Gone", key="other"),
            change(PATCHES, CONTACTS, {"entity": "other"}, "delete", [200, 1, 1, 1]),
        ],
    )
    apply_gold(spark, config(PATCHES), log=lambda _: None)
    cols = ["entity", "firstName", "lastName", "tags", "_seq"]
    assert rows(spark, "gold.contacts", cols) == [(ID, "Sally", None, '["a"]', [100, 1, 1, 1])]

    # Deleted, then re-created in the same batch: nothing of its first life remains.
    append(spark, [delete, op([400, 1, 1, 0], "add", "lastName", "New")])
    apply_gold(spark, config(PATCHES), log=lambda _: None)
    assert rows(spark, "gold.contacts", cols) == [(ID, None, "New", None, [400, 1, 1, 0])]
