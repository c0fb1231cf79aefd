"""records.prepare behind an endpoint override: `extra` is only walked when it mentions a moved
origin (`_mentions`, one C serialisation), and a record whose `extra` does mention one is still
rebased, whatever values `extra` holds."""
import datetime as dt

from basecrawler import Recall
from basecrawler.pipeline import records
from basecrawler.recordtypes import get_record_type

MOVED = "http://127.0.0.1:9"
BASES = [(MOVED, "https://pub.example")]


def prepare(record):
    return records.prepare(get_record_type("vehicle_recall"), record, source="us", today=dt.date(2024, 6, 1),
                           public_url=lambda url: records.rebase(url, BASES), moved_from=(MOVED,))


def recall(extra):
    return Recall(country="US", recall_number="1", recall_date="2024-01-01", source_url="https://pub.example/r/1",
                  extra=extra)


def test_a_link_on_a_moved_origin_deep_in_extra_is_rebased():
    record = recall({"fr": {"note": "Sièges — voir"}, "vehicles": [{"make": "FORD", "year": "2020"}] * 3,
                     "docs": [{"url": f"{MOVED}/d.pdf", "size": 12, "ok": True, "ratio": 0.5}]})
    public = prepare(record)
    assert public.extra["docs"] == [{"url": "https://pub.example/d.pdf", "size": 12, "ok": True, "ratio": 0.5}]
    assert public.extra["fr"] == {"note": "Sièges — voir"}


def test_a_moved_link_next_to_a_value_marshal_cannot_write_is_still_rebased():
    class Text(str):   # a str subclass: marshal refuses it, the repr fallback still finds the origin
        pass

    extra = {"seen": dt.date(2024, 1, 2), "link": Text(f"{MOVED}/x"), "other": f"{MOVED}/y"}
    assert records._mentions(extra, (MOVED,))
    public = prepare(recall({"other": f"{MOVED}/y", "seen": dt.date(2024, 1, 2)}))
    assert public.extra["other"] == "https://pub.example/y"


def test_a_link_with_undecodable_bytes_on_a_moved_origin_is_found():
    # surrogateescape'd bytes (the ca CSV keeps them so): marshal writes them surrogatepass.
    assert records._mentions({"t": f"\udcff {MOVED}/x é"}, (MOVED,))


def test_extra_that_mentions_no_moved_origin_leaves_the_record_uncopied():
    record = recall({"vehicles": [{"make": "FORD", "model": "F-150"}], "docs": ["https://pub.example/d.pdf"],
                     "port": "127.0.0.1:9 without a scheme"})
    assert not records._mentions(record.extra, (MOVED,))
    assert prepare(record) is record


def test_mentions_agrees_with_the_repr_rule():
    cases = [{}, {"a": MOVED}, {"a": [1, 2.5, None, True, {"b": f"x {MOVED}/p"}]}, {"a": "http://127.0.0.1:90"},
             {"a": ("t", MOVED + "?q")}, {"a": "https://pub.example"}, {MOVED: 1}, {"a": dt.date(2020, 1, 1)}]
    for extra in cases:
        assert records._mentions(extra, (MOVED,)) == (MOVED in repr(extra)), extra
