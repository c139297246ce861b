"""LangGraph's own store tests, run against the governed store.

Ported from LangGraph (https://github.com/langchain-ai/langgraph, MIT licence): the cases
of ``libs/checkpoint-sqlite/tests/test_store.py`` and ``libs/checkpoint/tests/test_store.py``
that ``SqliteStore`` and ``InMemoryStore`` pass without a vector index (the adapter has
no ``index`` configuration: ranking is the service's). Each test names the case it ports.

Where governance intentionally differs, the case is adapted, not skipped, and says why
on the line, starting ``# governance:``. The one adaptation that recurs: a delete is an
erasure, and nobody erases what their own principal wrote, so the app's items are deleted
through the operator's store (``deleter``).
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from governed_memory.integrations.langgraph import GovernedStore


def test_a_batch_answers_each_operation_in_order(store: GovernedStore) -> None:
    """LangGraph test_batch_order: get, put, search, list and a missing get, in order."""
    store.put(("test", "foo"), "key1", {"data": "value1"})
    store.put(("test", "bar"), "key2", {"data": "value2"})
    results = store.batch(
        [
            GetOp(namespace=("test", "foo"), key="key1"),
            PutOp(namespace=("test", "bar"), key="key2", value={"data": "value2"}),
            SearchOp(namespace_prefix=("test",), filter={"data": "value1"}, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            GetOp(namespace=("test",), key="key3"),
        ]
    )
    assert len(results) == 5
    first = results[0]
    assert isinstance(first, Item)
    assert (first.value, first.key, first.namespace) == (
        {"data": "value1"},
        "key1",
        ("test", "foo"),
    )
    assert results[1] is None
    found = results[2]
    assert isinstance(found, list) and [(i.key, i.value) for i in found] == [
        ("key1", {"data": "value1"})
    ]
    namespaces = results[3]
    assert isinstance(namespaces, list)
    assert ("test", "foo") in namespaces and ("test", "bar") in namespaces
    assert results[4] is None

    again = store.batch(
        [
            SearchOp(namespace_prefix=("test",), filter=None, limit=5, offset=0),
            GetOp(namespace=("test", "bar"), key="key2"),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=5, offset=0),
            PutOp(namespace=("test",), key="key3", value={"data": "value3"}),
            GetOp(namespace=("test", "foo"), key="key1"),
        ]
    )
    assert isinstance(again[0], list) and len(again[0]) >= 2
    assert isinstance(again[1], Item) and again[1].value == {"data": "value2"}
    assert isinstance(again[2], list) and len(again[2]) > 0
    assert again[3] is None
    assert isinstance(again[4], Item) and again[4].namespace == ("test", "foo")
    item3 = store.get(("test",), "key3")
    assert item3 is not None and item3.value == {"data": "value3"}


def test_batched_gets_find_what_exists_and_none_for_the_rest(store: GovernedStore) -> None:
    """LangGraph test_batch_get_ops."""
    store.put(("test",), "key1", {"data": "value1"})
    store.put(("test",), "key2", {"data": "value2"})
    results = store.batch(
        [
            GetOp(namespace=("test",), key="key1"),
            GetOp(namespace=("test",), key="key2"),
            GetOp(namespace=("test",), key="key3"),
        ]
    )
    assert [r.key if isinstance(r, Item) else r for r in results] == ["key1", "key2", None]


def test_batched_puts_write_and_a_none_value_deletes_nothing_missing(
    store: GovernedStore,
) -> None:
    """LangGraph test_batch_put_ops: a put of ``None`` for a missing key is a no-op."""
    results = store.batch(
        [
            PutOp(namespace=("test",), key="key1", value={"data": "value1"}),
            PutOp(namespace=("test",), key="key2", value={"data": "value2"}),
            PutOp(namespace=("test",), key="key3", value=None),
        ]
    )
    assert results == [None, None, None]
    item1, item2 = store.get(("test",), "key1"), store.get(("test",), "key2")
    assert item1 is not None and item1.value == {"data": "value1"}
    assert item2 is not None and item2.value == {"data": "value2"}
    assert store.get(("test",), "key3") is None


def test_batched_searches_filter_limit_and_keep_to_their_prefix(store: GovernedStore) -> None:
    """LangGraph test_batch_search_ops."""
    for namespace, key, value in [
        (("test", "foo"), "key1", {"data": "value1", "tag": "a"}),
        (("test", "bar"), "key2", {"data": "value2", "tag": "a"}),
        (("test", "baz"), "key3", {"data": "value3", "tag": "b"}),
    ]:
        store.put(namespace, key, value)
    tagged, first_two, foo = store.batch(
        [
            SearchOp(namespace_prefix=("test",), filter={"tag": "a"}, limit=10, offset=0),
            SearchOp(namespace_prefix=("test",), filter=None, limit=2, offset=0),
            SearchOp(namespace_prefix=("test", "foo"), filter=None, limit=10, offset=0),
        ]
    )
    assert isinstance(tagged, list) and isinstance(first_two, list) and isinstance(foo, list)
    assert len(tagged) == 2 and all(i.value["tag"] == "a" for i in tagged)
    assert len(first_two) == 2
    assert [i.namespace for i in foo] == [("test", "foo")]


def test_batched_namespace_listings_cut_depth_and_match_suffixes(store: GovernedStore) -> None:
    """LangGraph test_batch_list_namespaces_ops."""
    data = [
        (("test", "documents", "public"), "doc1", {"content": "public doc"}),
        (("test", "documents", "private"), "doc2", {"content": "private doc"}),
        (("test", "images", "public"), "img1", {"content": "public image"}),
        (("prod", "documents", "public"), "doc3", {"content": "prod doc"}),
    ]
    for namespace, key, value in data:
        store.put(namespace, key, value)
    every, shallow, public = store.batch(
        [
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=2, limit=10, offset=0),
            ListNamespacesOp(
                match_conditions=(MatchCondition("suffix", ("public",)),),
                max_depth=None,
                limit=10,
                offset=0,
            ),
        ]
    )
    assert isinstance(every, list) and len(every) == len(data)
    assert isinstance(shallow, list) and all(len(ns) <= 2 for ns in shallow)
    assert isinstance(public, list) and all(ns[-1] == "public" for ns in public)


def test_put_get_update_and_delete_round_trip(store: GovernedStore, deleter: GovernedStore) -> None:
    """LangGraph TestSqliteStore.test_basic_store_ops and test_basic_store_operations."""
    uid = uuid.uuid4().hex
    namespace, key = (uid, "test", "documents"), "doc1"
    value = {"title": "Test Document", "content": "Hello, World!"}
    assert store.search((uid,)) == []
    store.put(namespace, key, value)
    item = store.get(namespace, key)
    assert item is not None
    assert (item.namespace, item.key, item.value) == (namespace, key, value)
    assert item.created_at is not None and item.updated_at is not None
    time.sleep(0.01)
    updated = {"title": "Updated Test Document", "content": "Hello, LangGraph!"}
    store.put(namespace, key, updated)
    again = store.get(namespace, key)
    assert again is not None and again.value == updated
    assert again.updated_at >= item.updated_at
    assert store.get((uid, "test", "other_documents"), key) is None
    store.put(namespace, "doc2", {"title": "Another Document", "content": "Greetings!"})
    assert {i.key for i in store.search((uid, "test"), limit=10)} == {"doc1", "doc2"}
    assert namespace in store.list_namespaces(prefix=(uid, "test"))
    deleter.delete(namespace, key)  # governance: the operator erases the app's memory
    deleter.delete(namespace, "doc2")
    assert store.get(namespace, key) is None
    assert store.get(namespace, "doc2") is None
    assert store.search((uid, "test"), limit=10) == []


def test_namespaces_list_by_prefix_suffix_wildcard_depth_and_page(store: GovernedStore) -> None:
    """LangGraph test_list_namespaces_operations (and TestSqliteStore.test_list_namespaces)."""
    pref = str(uuid.uuid4())
    namespaces = [
        (pref, "test", "documents", "public", pref),
        (pref, "test", "documents", "private", pref),
        (pref, "test", "images", "public", pref),
        (pref, "test", "images", "private", pref),
        (pref, "prod", "documents", "public", pref),
        (pref, "prod", "documents", "some", "nesting", "public", pref),
        (pref, "prod", "documents", "private", pref),
    ]
    for namespace in namespaces:
        store.put(namespace, "dummy", {"content": "dummy"})
    assert len(store.list_namespaces(prefix=(pref, "test"))) == 4
    specific = store.list_namespaces(prefix=(pref, "test", "documents"))
    assert len(specific) == 2 and all(ns[1:3] == ("test", "documents") for ns in specific)
    public = store.list_namespaces(suffix=("public", pref))
    assert len(public) == 4 and all(ns[-2] == "public" for ns in public)
    both = store.list_namespaces(prefix=(pref, "test"), suffix=("public", pref))
    assert len(both) == 2 and all(ns[1] == "test" and ns[-2] == "public" for ns in both)
    wild = store.list_namespaces(prefix=(pref, "*", "documents"))
    assert len(wild) == 5 and all(ns[2] == "documents" for ns in wild)
    assert len(store.list_namespaces(suffix=("*", "public", pref))) == 4
    assert store.list_namespaces(suffix=("some", "*", "public", pref)) == [namespaces[5]]
    assert all(len(ns) <= 3 for ns in store.list_namespaces(max_depth=3))
    deep = store.list_namespaces(max_depth=4, prefix=(pref, "*", "documents"))
    assert len(set(deep)) == len(deep) == 5
    assert len(store.list_namespaces(prefix=(pref,), limit=3)) == 3
    assert len(store.list_namespaces(prefix=(pref,), offset=3)) == len(namespaces) - 3
    assert set(store.list_namespaces(prefix=(pref,))) == set(namespaces)


def test_search_filters_by_namespace_value_and_pages(store: GovernedStore) -> None:
    """LangGraph test_search_items (and TestSqliteStore.test_search)."""
    base = "test_search_items"
    namespaces = [
        (base, "documents", "user1"),
        (base, "documents", "user2"),
        (base, "reports", "department1"),
        (base, "reports", "department2"),
    ]
    values = [
        {"title": "Doc 1", "author": "John Doe", "tags": ["important"]},
        {"title": "Doc 2", "author": "Jane Smith", "tags": ["draft"]},
        {"title": "Report A", "author": "John Doe", "tags": ["final"]},
        {"title": "Report B", "author": "Alice Johnson", "tags": ["draft"]},
    ]
    for namespace, value in zip(namespaces, values, strict=True):
        store.put(namespace, f"item_{namespace[-1]}", value)
    docs = store.search((base, "documents"))
    assert len(docs) == 2 and all(i.namespace[1] == "documents" for i in docs)
    reports = store.search((base, "reports"))
    assert len(reports) == 2 and all(i.namespace[1] == "reports" for i in reports)
    first, second = store.search((base,), limit=2), store.search((base,), limit=2, offset=2)
    assert len(first) == len(second) == 2
    assert {i.key for i in first}.isdisjoint({i.key for i in second})
    assert len(store.search((base,))) == 4
    john = store.search((base,), filter={"author": "John Doe"})
    assert len(john) == 2 and all(i.value["author"] == "John Doe" for i in john)
    drafts = store.search((base,), filter={"tags": ["draft"]})
    assert len(drafts) == 2 and all("draft" in i.value["tags"] for i in drafts)


def test_a_filter_is_data_never_a_query(store: GovernedStore) -> None:
    """LangGraph test_sql_injection_vulnerability and test_sql_injection_filter_values."""
    store.put(("docs",), "public", {"access": "public", "data": "public info"})
    store.put(("docs",), "private", {"access": "private", "data": "secret", "password": "123"})
    normal = store.search(("docs",), filter={"access": "public"})
    assert [i.value["access"] for i in normal] == ["public"]
    malicious_key = "access') = 'public' OR '1'='1' OR json_extract(value, '$."
    # governance: filters run in Python on decrypted values, never in SQL, so there is no
    # key to refuse ("Invalid filter key" in SqliteStore): the odd key just matches nothing.
    assert store.search(("docs",), filter={malicious_key: "dummy"}) == []
    for malicious in [
        "public' OR '1'='1",
        "public'; --",
        "public' UNION SELECT * FROM store --",
        "public\x00' OR '1'='1",
        "''''",
        "public' OR 'א'='א",
    ]:
        assert store.search(("docs",), filter={"access": malicious}) == []
    store.put(("docs",), "doc4", {"title": "O'Brien's Document", "access": "public"})
    found = store.search(("docs",), filter={"title": "O'Brien's Document"})
    assert [i.key for i in found] == ["doc4"]


def test_numeric_filters_compare_as_numbers(store: GovernedStore) -> None:
    """LangGraph test_numeric_filter_safety."""
    for key, price, quantity in [("item1", 10, 5), ("item2", 20, 3), ("item3", 30, 1)]:
        store.put(("items",), key, {"price": price, "quantity": quantity})
    above = store.search(("items",), filter={"price": {"$gt": 15}})
    assert len(above) == 2 and all(i.value["price"] > 15 for i in above)
    assert len(store.search(("items",), filter={"price": {"$lt": float("inf")}})) == 3
    assert len(store.search(("items",), filter={"price": {"$gt": float("-inf")}})) == 3
    assert store.search(("items",), filter={"price": {"$eq": float("nan")}}) == []
    assert len(store.search(("items",), filter={"price": {"$lt": 10**100}})) == 3
    store.put(("items",), "item4", {"price": -10, "quantity": 0})
    assert [i.key for i in store.search(("items",), filter={"price": {"$lt": 0}})] == ["item4"]


def test_boolean_filters_match_booleans(store: GovernedStore) -> None:
    """LangGraph test_boolean_filter_safety."""
    store.put(("flags",), "flag1", {"active": True, "name": "Feature A"})
    store.put(("flags",), "flag2", {"active": False, "name": "Feature B"})
    store.put(("flags",), "flag3", {"active": True, "name": "Feature C"})
    assert sorted(i.key for i in store.search(("flags",), filter={"active": True})) == [
        "flag1",
        "flag3",
    ]
    assert [i.key for i in store.search(("flags",), filter={"active": False})] == ["flag2"]


def test_filter_keys_may_hold_hyphens_digits_and_dotted_paths(store: GovernedStore) -> None:
    """LangGraph test_filter_keys_with_hyphens_and_digits."""
    store.put(("docs",), "hyphen", {"access-level": "public", "user": {"access-level": "nested"}})
    store.put(("docs",), "digit", {"123abc": "ok", "user": {"123abc": "ok2"}})
    for conditions, key in [
        ({"access-level": "public"}, "hyphen"),
        ({"user.access-level": "nested"}, "hyphen"),
        ({"123abc": "ok"}, "digit"),
        ({"user.123abc": "ok2"}, "digit"),
    ]:
        assert [i.key for i in store.search(("docs",), filter=conditions)] == [key]


def test_a_query_finds_text_in_any_script(store: GovernedStore) -> None:
    """LangGraph test_non_ascii: each text is the best hit for itself."""
    texts = ["这是中文", "これは日本語です", "이건 한국어야", "Это русский", "यह रूसी है"]
    for number, text in enumerate(texts, start=1):
        store.put(("user_123", "memories"), str(number), {"text": text})
    for number, text in enumerate(texts, start=1):
        # governance: ranked by the service's analyzer (BM25 over stemmed words and CJK
        # character pairs), not by embeddings; the expectation is the same.
        assert store.search(("user_123", "memories"), query=text)[0].key == str(number)


def test_search_prefixes_stop_at_label_boundaries(store: GovernedStore) -> None:
    """LangGraph test_search_namespace_segment_boundary."""
    for namespace in [
        ("foo",),
        ("foo", "child"),
        ("foo", "child", "deep"),
        ("foobar",),
        ("foobar", "baz"),
        ("foo2",),
    ]:
        store.put(namespace, "k", {"v": 1})

    def namespaces(prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
        return {item.namespace for item in store.search(prefix, limit=100)}

    assert namespaces(("foo",)) == {("foo",), ("foo", "child"), ("foo", "child", "deep")}
    assert namespaces(("foobar",)) == {("foobar",), ("foobar", "baz")}
    assert namespaces(("foo2",)) == {("foo2",)}
    assert namespaces(("fo",)) == set()


def test_search_prefixes_are_literal_and_case_sensitive(store: GovernedStore) -> None:
    """LangGraph test_search_namespace_wildcard_chars_are_literal and
    test_search_namespace_is_case_sensitive."""
    for namespace in [
        ("user_1",),
        ("user_1", "child"),
        ("userX1",),
        ("a%b",),
        ("axxb",),
        ("star*",),
        ("starX",),
    ]:
        store.put(namespace, "k", {"v": 1})
    store.put(("Foo",), "k", {"v": "upper"})
    store.put(("foo",), "k", {"v": "lower"})

    def namespaces(prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
        return {item.namespace for item in store.search(prefix, limit=100)}

    assert namespaces(("user_1",)) == {("user_1",), ("user_1", "child")}
    assert namespaces(("a%b",)) == {("a%b",)}
    assert namespaces(("star*",)) == {("star*",)}
    assert namespaces(("foo",)) == {("foo",)}
    assert namespaces(("Foo",)) == {("Foo",)}


def test_namespace_listings_align_to_labels(store: GovernedStore) -> None:
    """LangGraph test_list_namespaces_segment_boundary, test_namespace_labels_with_trailing_
    newline and test_list_namespaces_metacharacter_labels."""
    for namespace in [
        ("foo",),
        ("foo", "child"),
        ("foobar",),
        ("foobar", "baz"),
        ("uid", "users", "alice"),
        ("uid", "users", "malice"),
        ("uid", "a", "b", "alice"),
        ("users", "alice\n"),
        ("star*",),
        ("starX",),
        ("star*", "child"),
    ]:
        store.put(namespace, "k", {"v": 1})
    assert set(store.list_namespaces(prefix=["foo"], limit=100)) == {("foo",), ("foo", "child")}
    assert set(store.list_namespaces(suffix=["alice"], limit=100)) == {
        ("uid", "users", "alice"),
        ("uid", "a", "b", "alice"),
    }
    assert store.list_namespaces(prefix=["uid", "*", "alice"], limit=100) == [
        ("uid", "users", "alice")
    ]
    assert len(store.list_namespaces(prefix=["uid"], limit=100)) == 3
    assert store.list_namespaces(prefix=["users", "alice"], limit=100) == []
    assert set(store.list_namespaces(prefix=["star*"], limit=100)) == {
        ("star*",),
        ("star*", "child"),
    }


def test_an_empty_prefix_searches_the_whole_scope(store: GovernedStore) -> None:
    """LangGraph test_search_empty_prefix_is_unconstrained: "unconstrained" within the
    store's scope, the agent and purpose its namespace map names."""
    for namespace in [("a",), ("b", "c"), ("d", "e", "f")]:
        store.put(namespace, "k", {"v": 1})
    found = {item.namespace for item in store.search((), limit=100)}
    assert found == {("a",), ("b", "c"), ("d", "e", "f")}


def test_namespaces_list_like_langgraphs_in_memory_store(store: GovernedStore) -> None:
    """LangGraph test_list_namespaces_basic, _with_wildcards, _max_depth, _no_conditions."""
    namespaces = [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
        ("users", "123"),
        ("users", "456", "settings"),
        ("admin", "users", "789"),
    ]
    assert store.list_namespaces() == []
    for number, namespace in enumerate(namespaces):
        store.put(namespace, f"id_{number}", {"data": f"value_{number:02d}"})
    ab = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("a", "b")) == ab
    assert store.list_namespaces(suffix=("f",)) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert store.list_namespaces(prefix=("a",), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == ab[:2]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == ab[2:]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(suffix=("*", "f")) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert store.list_namespaces(prefix=("nonexistent",)) == []
    assert store.list_namespaces(prefix=("users", "123")) == [("users", "123")]
    assert store.list_namespaces(prefix=("users", "*")) == [
        ("users", "123"),
        ("users", "456", "settings"),
    ]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []
    assert store.list_namespaces(max_depth=2) == [
        ("a", "b"),
        ("a", "c"),
        ("admin", "users"),
        ("b", "a"),
        ("users", "123"),
        ("users", "456"),
    ]
    assert sorted(store.list_namespaces()) == sorted(namespaces)


def test_namespace_listings_page_in_order(store: GovernedStore) -> None:
    """LangGraph test_list_namespaces_pagination."""
    for number in range(20):
        store.put(("namespace", f"sub_{number:02d}"), f"id_{number:02d}", {"data": number})
    for offset in (0, 5, 15):
        page = store.list_namespaces(prefix=("namespace",), limit=5, offset=offset)
        assert page == [("namespace", f"sub_{n:02d}") for n in range(offset, offset + 5)]


def test_invalid_namespaces_are_refused_and_langgraph_labels_inside_work(
    store: GovernedStore, deleter: GovernedStore
) -> None:
    """LangGraph test_cannot_put_empty_namespace, sync and async."""
    doc = {"foo": "bar"}
    for namespace in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "foo", doc)
        with pytest.raises(InvalidNamespaceError):
            asyncio.run(store.aput(namespace, "foo", doc))

    async def inside() -> None:
        namespace = ("foo", "langgraph", "foo")
        await store.aput(namespace, "bar", doc)
        found = await store.aget(namespace, "bar")
        assert found is not None and found.value == doc
        assert (await store.asearch(namespace, query="bar"))[0].value == doc
        await deleter.adelete(namespace, "bar")  # governance: the operator erases
        assert await store.aget(namespace, "bar") is None
        # past the public put API, as LangGraph's test does
        await store.abatch([PutOp(("langgraph", "foo"), "bar", doc)])
        assert (await store.asearch(("langgraph", "foo")))[0].value == doc
        await deleter.adelete(("langgraph", "foo"), "bar")
        assert await store.aget(("langgraph", "foo"), "bar") is None

    asyncio.run(inside())
    store.put(("foo", "langgraph", "foo"), "bar", doc)
    assert store.search(("foo", "langgraph", "foo"), query="bar")[0].value == doc
    deleter.delete(("foo", "langgraph", "foo"), "bar")
    assert store.get(("foo", "langgraph", "foo"), "bar") is None
