"""The structural-limits check before a record is prepared (pipeline/intake.py `_prepared`,
issue #35 item 8): a record validated from a dict is walked only in the fields its model
declares as containers, and a record parse() handed over as a model instance — which
`model_construct` fills without validating — is walked in every field, so a container nested
past the limits in a text field is still one dead letter, never the store's problem."""
from basecrawler import BaseCrawler, Recall, Store
from basecrawler.config import Settings
from basecrawler.formats.jsonlimits import DEFAULT_LIMITS
from basecrawler.pipeline.recordlimits import container_fields


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def test_only_declared_containers_of_a_validated_record_are_walked():
    assert container_fields(Recall) == ("extra",)


def test_an_instance_from_parse_is_walked_in_every_field(tmp_path):
    deep = _nested(DEFAULT_LIMITS.depth + 5)

    class Instances(BaseCrawler):
        source, country = "us", "US"

        def fetch(self):
            yield from range(3)

        def parse(self, n):
            fields = {"country": "US", "recall_number": f"R{n}", "recall_date": "2024-05-01"}
            if n == 1:   # a text field holding what no validation would let through
                return Recall.model_construct(**Recall(**fields).__dict__ | {"summary_original": deep})
            return Recall(**fields)

    store = Store(str(tmp_path / "s.db"))
    try:
        result = Instances(store, mode="full", settings=Settings.from_env()).run()
        assert (result.counts.new, result.counts.unparseable) == (2, 1)
        kinds = [row["kind"] for row in store.query("SELECT kind FROM dead_letters")]
        assert kinds == ["too_deep"], kinds
    finally:
        store.close()


def test_a_flat_extra_over_the_bound_in_c_is_walked_not_refused():
    """The check told in C bounds a flat dict's texts together by one text's limit; texts each
    within it but longer together only mean a walk, never a refusal."""
    import pytest

    from basecrawler.errors import OverLimit
    from basecrawler.pipeline.recordlimits import check_containers

    half = "x" * (DEFAULT_LIMITS.string // 2 + 1)
    fields = {"country": "US", "recall_number": "R1", "recall_date": "2024-05-01"}
    check_containers(Recall(**fields, extra={"a": half, "b": half}), False)   # within the limits: no error
    with pytest.raises(OverLimit):
        check_containers(Recall(**fields, extra={"a": half * 2}), False)
