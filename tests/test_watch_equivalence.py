"""The matcher answering all watches at once (`watch/selection.py`: terms found by one pass of
Python over the new records' texts, `watch/textscan.py`, the rest asked of the store, other
filters as sets) queues exactly what a watch-by-watch reference queues: each watch's own
search (`iter_recalls`, the reading side's query) over the store, its sources applied, every
record version it selects. Randomised records and watches, on both engines: Korean and
Japanese text, ASCII and Unicode case (letters that fold into ASCII: İ, ſ, the Kelvin sign),
LIKE's special characters, 1–2 character terms, multi-valued facets in any case, source and
country filters, then records changed and translated, and a second pass."""
from __future__ import annotations

import random
import uuid

import pytest

from basecrawler.reading.search import iter_recalls
from basecrawler.recordtypes import get_record_type
from basecrawler.store.core import Store
from basecrawler.watch import matching, outbox, pg_terms, repository, textscan
from basecrawler.watch.model import Watch
from pgcluster import any_db, pg_cluster, pg_url  # noqa: F401  (fixtures)
from record_types.product_alert import ProductAlert
from basecrawler.store.engines.dialect import dialect_of

EARLY = "2000-01-01T00:00:00+00:00"
PIECES = [
    "Listeria", "lead", "Q7", "ab", "salmonella", "kit", "izmir", "strasse", "sos", "product",
    "50%", "a_b", "x\\y", "100%_off", "%", "_", "\\", "a%b",
    "화재", "리스테리아", "치즈", "위험", "화",
    "リコール", "燃料", "ブレ", "火災", "食品", "ル",
    "İzmir", "ſalmonella", "\u212aIT", "Straße", "STRASSE", "Éclair", "éclair", "ΣΟΦΙΑ", "σοφια", "Ａｂ", "ǅemal",
]
CATEGORIES = ["Food", "food", "Toys", "TOYS", "Cosmetics", "Élec"]


def _cased(rng: random.Random, text: str) -> str:
    return rng.choice([str.lower, str.upper, str.title, str, str])(text)


def _text(rng: random.Random, pieces: int) -> str:
    return " ".join(_cased(rng, rng.choice(PIECES)) for _ in range(pieces))


def _records(rng: random.Random, source: str, count: int, tag: str = "") -> list[ProductAlert]:
    return [ProductAlert(
        country=rng.choice(["CA", "FR", "JP"]), alert_id=f"{source}-{i}", alert_date="2025-01-01",
        title_original=f"{_text(rng, rng.randint(1, 3))} {tag}{i}",
        hazard_original=rng.choice([None, "", _text(rng, 1), _text(rng, 2)]),
        product_original=rng.choice([None, _text(rng, 1)]),
        brand=rng.choice([None, _text(rng, 1)]),
        category=rng.sample(CATEGORIES, rng.randint(0, 3)))
        for i in range(count)]


def _term(rng: random.Random) -> str:
    piece = _cased(rng, rng.choice(PIECES))
    if rng.random() < 0.4 and len(piece) > 1:   # a part of a word, often 1–2 characters
        start = rng.randrange(len(piece))
        piece = piece[start:start + rng.randint(1, 3)]
    return piece


def _watches(rng: random.Random, count: int) -> list[Watch]:
    watches = []
    for n in range(count):
        text = " ".join(_term(rng) for _ in range(rng.choice([0, 1, 1, 1, 2])))
        facets = ()
        if rng.random() < 0.4 or not text:
            facets = (("category", _cased(rng, rng.choice(CATEGORIES))),)
        watches.append(Watch(
            name=f"w{n}", channel="feed", record_type="product_alert", text=text or None, facets=facets,
            sources=rng.choice([(), (), ("hc",), ("hc", "eu"), ("nowhere",)]),
            countries=rng.choice([(), (), ("FR",), ("CA", "JP")]),
            options={"as_soon_as_seen": rng.random() < 0.7}))
    return watches


def _expected(store, watches: list[Watch]) -> set[tuple]:
    """(watch, record, version) of every record each watch's own search selects now."""
    record_type = get_record_type("product_alert")
    out = set()
    for watch in watches:
        names, rows = iter_recalls(store.db.conn, matching.filter_for(watch, record_type))
        for values in rows:
            row = dict(zip(names, values))
            if not watch.sources or row["source"] in watch.sources:
                out.add((watch.id, row["id"], matching.version_of(record_type, row)))
    return out


def _queued(store) -> set[tuple]:
    return {(r["watch_id"], r["record_id"], r["version"])
            for r in store.query(dialect_of(store).query("SELECT watch_id, record_id, version FROM watch_outbox"))}


@pytest.fixture(params=["table index", "own index"])
def texts(request, monkeypatch):
    """PostgreSQL reads the terms Python leaves to it from the type's index or from an index
    of the candidates' texts (`pg_terms._own_index`): each is run."""
    monkeypatch.setattr(pg_terms, "_own_index", lambda *args: request.param == "own index")
    return request.param


@pytest.mark.parametrize("seed", [1, 2])
def test_all_watches_at_once_queue_what_each_search_selects(any_db, texts, seed):  # noqa: F811
    if texts == "own index" and not any_db.startswith("postgresql"):
        pytest.skip("SQLite has one way to read a term")
    rng = random.Random(seed)
    store = Store(any_db)
    try:
        watches = [repository.add(store, w, now=EARLY) for w in _watches(rng, 120)]
        for source in ("hc", "eu"):
            store.upsert("product_alert", _records(rng, source, 120), source=source)
        expected = _expected(store, watches)
        # (the randomness covers what it should: many matches, unsure texts, terms left to the store)
        assert len(expected) > 300
        assert any(not textscan.plain_term(t) for w in watches for t in (w.text or "").split())
        matching.match(store)
        assert _queued(store) == expected

        # Changed records (a new title for some, a Korean translation for others) and a second pass.
        changed = _records(rng, "hc", 40, tag="changed ")
        store.upsert("product_alert", changed, source="hc")
        for record_id in rng.sample([r["id"] for r in store.query(dialect_of(store).query("SELECT id FROM product_alerts"))], 60):
            d = dialect_of(store)
            store.write(lambda db, i=record_id: db.conn.execute(
                d.write(f"UPDATE product_alerts SET title_ko = {d.p}, hazard_ko = {d.p}, "
                        "translated_at = '2099-01-01T00:00:00+00:00', "
                        f"updated_at = '2099-01-01T00:00:00+00:00' WHERE id = {d.p}"), [_text(rng, 2), _text(rng, 1), i]))
        expected |= _expected(store, watches)
        matching.match(store)
        assert _queued(store) == expected
        assert matching.match(store).queued == 0
    finally:
        store.close()


def test_every_letter_that_folds_into_a_plain_term_is_listed():
    """FOLDS_INTO_PLAIN is what `folds_into_plain` finds over all of Unicode (kept as a
    constant since the search takes a second)."""
    found = "".join(chr(c) for c in range(0x80, 0x110000) if textscan.folds_into_plain(chr(c)))
    assert found == textscan.FOLDS_INTO_PLAIN


def test_scan_finds_plain_terms_once_per_record_and_leaves_unsure_texts():
    scan = textscan.TextScan([(1, "Listeria in CHEESE"), (2, "50% off a_b"), (3, "\u212aIT kit"),
                              (4, "치즈 리스테리아 LISTERIA"), (5, None), (6, "Listeria\u3000LISTERIA")])
    assert scan.unsure == {3}
    assert scan.ids("listeria") == {1, 4, 6}
    assert scan.ids("%") == {2} and scan.ids("_b") == {2} and scan.ids("b") == {2}
    assert scan.ids("치즈") == {4} and scan.ids("kit") == set()
    assert scan.ids("in") == {1} and scan.ids("n c") == set()   # (a term never holds whitespace)
    assert not textscan.plain_term("Müller") and not textscan.plain_term("ΣΟΦΙΑ") and textscan.plain_term("火災Q7")


def test_delivery_ids_are_the_uuid5_of_the_record_version():
    rng = random.Random(5)
    for n in range(500):
        watch = Watch(name="w", channel="feed", id=rng.randint(1, 10**6), created_at=f"2026-12-03T08:{n % 60:02d}:00+00:00")
        record_id, version = rng.randint(1, 10**9), f"{rng.getrandbits(96):024x}"
        name = f"{watch.id}:{watch.created_at}:product_alert:{record_id}:{version}"
        assert matching.delivery_id(watch, "product_alert", record_id, version) == str(uuid.uuid5(matching._NAMESPACE, name))


def test_outbox_rows_another_process_queued_meanwhile_are_kept(any_db):  # noqa: F811
    """PostgreSQL writes new rows with one COPY; a row already there (another matcher queued
    it between our read and our write) fails it, and the rows go again without it."""
    store = Store(any_db)
    try:
        watch = repository.add(store, Watch(name="w", channel="feed"), now=EARLY)

        def row(n, payload):
            return [f"delivery-{n}", watch.id, "product_alert", n, "v1", "new", payload, "pending", EARLY]
        store.write(lambda db: outbox.insert_new(db.conn, [row(1, "first"), row(2, "first")]))
        store.write(lambda db: outbox.insert_new(db.conn, [row(2, "second"), row(3, "second")]))
        got = {r["record_id"]: r["payload"] for r in store.query(dialect_of(store).query("SELECT record_id, payload FROM watch_outbox"))}
        assert got == {1: "first", 2: "first", 3: "second"}
    finally:
        store.close()


def test_versions_are_those_queued_before():
    """A record's version is what earlier passes stored (a different digest would queue every
    watched record again as changed): the sorted JSON of its data and Korean columns."""
    import hashlib
    import json

    record_type = get_record_type("product_alert")
    rng = random.Random(9)
    for _ in range(200):
        row = {c: rng.choice([None, "", 0, 1.5, _text(rng, 2), '["Food"]']) for c in record_type.column_types}
        row["id"] = 1
        values = {c: row.get(c) for c in (*record_type.data_columns, *record_type.korean_columns)}
        before = hashlib.sha256(json.dumps(values, sort_keys=True, default=str, ensure_ascii=False).encode()).hexdigest()
        assert matching.version_of(record_type, row) == before[:24]
        fields = {c: row.get(c) for c in (*record_type.data_columns, *record_type.korean_columns)
                  if row.get(c) not in (None, "", "[]", "{}")}
        assert list(matching.payload_of(record_type, row)["fields"]) == list(fields)
