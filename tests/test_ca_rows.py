"""sources/ca.py: how pass two keeps a recall's rows (whole, as wide as the header, equal cells
shared with the first row once a recall is long or scattered), the columns it hands on, and
what parse() reads from them."""
import csv
import logging

from sources.ca import SHARE_AFTER_ROWS, CanadaCrawler, count_rows, group_rows

HEADER = ["RECALL_NUMBER_NUM", "YEAR", "MANUFACTURER_RECALL_NO_TXT", "CATEGORY_ETXT", "CATEGORY_FTXT",
          "MAKE_NAME_NM", "MODEL_NAME_NM", "UNIT_AFFECTED_NBR", "SYSTEM_TYPE_ETXT", "SYSTEM_TYPE_FTXT",
          "NOTIFICATION_TYPE_ETXT", "NOTIFICATION_TYPE_FTXT", "COMMENT_ETXT", "COMMENT_FTXT", "RECALL_DATE_DTE"]
COMMENT = "Issue: A bolt may loosen. Safety Risk: A crash. Corrective Actions: Dealers will tighten it."


def row(number, year="2020", model="CIVIC", make="HONDA", units="100.00", comment=COMMENT):
    return [number, year, "R1", "Passenger Car", "Voiture de tourisme", make, model, units, "Brakes", "Freins",
            "Safety Mfr", "Sécurité - fabricant", comment, "Problème : un boulon.", "2020-01-15"]


def write(path, rows, header=HEADER):
    with open(path, "w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


def groups(path):
    return list(group_rows(path, count_rows(path)))


def parse(group):
    return CanadaCrawler.__new__(CanadaCrawler).parse(None, group)   # parse() reads nothing of the run


def test_a_short_later_row_repeats_the_first_rows_cells_and_a_long_row_is_cut(tmp_path, caplog):
    short = row("2020001", year="2021", make="ACURA")[:6]            # ends after MAKE_NAME_NM
    long = row("2020001", year="2022", model="PILOT") + ["stray"]
    with caplog.at_level(logging.WARNING, logger="sources.ca"):
        (group,) = groups(write(tmp_path / "f.csv", [row("2020001"), short, long]))
    assert len(group["columns"]) == 15 and group["rows"] == 3
    record = parse(group)
    assert record["extra"]["vehicles"] == [{"make": "HONDA", "model": "CIVIC", "year": "2020"},
                                           {"make": "ACURA", "model": "CIVIC", "year": "2021"},
                                           {"make": "HONDA", "model": "PILOT", "year": "2022"}]
    assert record["affected_units"] == 100 and record["recall_date"] == "2020-01-15"
    assert sum("cells, header has 15" in m for m in caplog.messages) == 2


def test_a_short_first_row_reads_as_empty_cells_that_later_rows_fill(tmp_path):
    first = row("2020002")[:8]       # no system, notification, comments or date
    (group,) = groups(write(tmp_path / "f.csv", [first, row("2020002", year="2021")]))
    record = parse(group)
    assert record["component_original"] == "Brakes"
    assert record["summary_original"] == COMMENT and record["defect_cause_original"] == "A bolt may loosen."
    assert record["recall_date"] == "2020-01-15"


def test_a_column_missing_from_the_header_reads_as_empty(tmp_path):
    header = [name for name in HEADER if name not in ("MAKE_NAME_NM", "UNIT_AFFECTED_NBR")]
    rows = [[cell for name, cell in zip(HEADER, row("2020003", year=y)) if name in header] for y in ("2019", "2020")]
    record = parse(groups(write(tmp_path / "f.csv", rows, header))[0])
    assert record["manufacturer_original"] is None and record["affected_units"] is None
    assert [v["year"] for v in record["extra"]["vehicles"]] == ["2019", "2020"]


def test_the_first_non_empty_text_of_any_row_is_taken_in_row_order(tmp_path):
    rows = [row("2020004", comment=""), row("2020004", comment="Translation not available"),
            row("2020004", comment="Second."), row("2020004", comment="Third.")]
    assert parse(groups(write(tmp_path / "f.csv", rows))[0])["summary_original"] == "Second."


def held_rows(path):
    """The rows of the open recalls just before the last one completes (what pass two holds)."""
    import sources.ca_csv as ca

    seen = []
    original = ca._as_columns
    ca._as_columns = lambda group: seen.append(group["rows"]) or original(group)
    try:
        emitted = groups(path)
    finally:
        ca._as_columns = original
    return seen, emitted


def test_a_long_recall_shares_equal_cells_with_its_first_row_while_it_is_read(tmp_path):
    n = SHARE_AFTER_ROWS + 10
    rows = [row("2020005", year=str(1990 + i % 30), model=f"M{i}") for i in range(n)]
    (held,), (group,) = held_rows(write(tmp_path / "f.csv", rows))
    comment = HEADER.index("COMMENT_ETXT")
    assert held[-1][comment] is held[0][comment]      # one string object, not a copy per row
    assert held[-1][HEADER.index("MODEL_NAME_NM")] == f"M{n - 1}"
    record = parse(group)
    assert len(record["extra"]["vehicles"]) == n and record["model_year"]


def test_a_scattered_recall_is_emitted_once_whole_with_its_cells_shared(tmp_path):
    rows = [row("2020006", model="CIVIC"), row("2020007"), row("2020007", model="FIT"), row("2020006", model="PILOT")]
    held, emitted = held_rows(write(tmp_path / "f.csv", rows))
    assert [g["recall_number"] for g in emitted] == ["2020007", "2020006"]
    comment = HEADER.index("COMMENT_ETXT")
    assert held[1][1][comment] is held[1][0][comment]
    assert parse(emitted[1])["model_original"] == "CIVIC, PILOT"
    assert set(emitted[0]) == {"recall_number", "header", "rows", "columns"}     # no bookkeeping handed on


def test_a_column_of_equal_cells_is_handed_on_as_that_one_cell(tmp_path):
    rows = [row("2020008", year=str(2000 + i)) for i in range(5)]
    (group,) = groups(write(tmp_path / "f.csv", rows))
    columns = dict(zip(group["header"], group["columns"]))
    assert group["rows"] == 5 and columns["COMMENT_ETXT"] == (COMMENT,)
    assert columns["YEAR"] == ("2000", "2001", "2002", "2003", "2004")
    record = parse(group)
    assert record["summary_original"] == COMMENT and len(record["extra"]["vehicles"]) == 5


# ---- vehicles shared between recalls (issue #23: a batch's memory) ---------------------------
def input_hash(record):
    from basecrawler.pipeline.inputhash import input_hash_of

    return input_hash_of(record, "")


def test_a_vehicle_named_by_several_recalls_is_one_object_and_a_repeat_within_one_is_its_own(tmp_path):
    import sources.ca_csv as ca

    ca.SHARED.clear()
    first, second = (parse(g) for g in groups(write(tmp_path / "f.csv", [
        row("2020001"), row("2020001", model="PILOT"), row("2020001"),       # CIVIC listed twice
        row("2020002", model="PILOT"), row("2020002")])))
    civic, pilot, civic_again = first["extra"]["vehicles"]
    assert civic == civic_again and civic is not civic_again
    assert second["extra"]["vehicles"][0] is pilot and second["extra"]["vehicles"][1] is civic


def test_a_recall_pickles_to_the_same_bytes_whatever_was_read_before_it(tmp_path, monkeypatch):
    import sources.ca_csv as ca

    rows = [row("2020002", model="PILOT"), row("2020002", make=" HONDA"), row("2020002", model="PILOT")]
    ca.SHARED.clear()
    (alone,) = groups(write(tmp_path / "alone.csv", rows))
    expected = input_hash(parse(alone))
    for table_size in (3, ca.SHARED_MAX):     # emptied between recalls, or not at all
        monkeypatch.setattr(ca, "SHARED_MAX", table_size)
        ca.SHARED.clear()
        *before, after = groups(write(tmp_path / "after.csv", [row("2020001"), row("2020001", model="PILOT"),
                                                                row("2020001", year="2021")] + rows))
        for group in before:
            parse(group)
        assert input_hash(parse(after)) == expected
        assert len(ca.SHARED) <= table_size + 8   # one recall's cells and vehicles beyond the bound, at most


def test_whole_adjacent_recalls_and_row_by_row_ones_are_handed_on_in_file_order(tmp_path, caplog):
    # Whole adjacent runs (2020011, 2020013) go on at once; a scattered recall (2020010), a run
    # with a short row (2020012) and a row without a number go row by row, in the same order.
    rows = [row("2020010", model="CIVIC"), row("2020011"), row("2020011", year="2021"),
            row("2020012"), row("2020012", year="2022")[:6], ["", "2020", "orphan"], [],
            row("2020010", model="FIT"), row("2020013", year="2019")]
    path = write(tmp_path / "f.csv", rows)
    with open(path, "a", encoding="utf-8") as out:   # a blank line (csv reads it as no cells)
        out.write("\n" + ",".join(f'"{cell}"' for cell in row("2020014")) + "\n")
    with caplog.at_level(logging.WARNING, logger="sources.ca"):
        emitted = groups(path)
    assert [g["recall_number"] for g in emitted] == ["2020011", "2020012", None, "2020010", "2020013", "2020014"]
    assert [g["rows"] for g in emitted if g["recall_number"]] == [2, 2, 2, 1, 1]
    assert emitted[2]["line"] == 7 and emitted[2]["rows"][0]["MANUFACTURER_RECALL_NO_TXT"] == "orphan"
    assert parse(emitted[1])["model_year"] == "2020-2022" and parse(emitted[3])["model_original"] == "CIVIC, FIT"
    assert sum("row 6 has 6 cells" in message for message in caplog.messages) == 1


def test_model_years_are_the_year_range_of_each_recalls_own_years(tmp_path):
    # The range is cached by the set of years: recalls with the same years in another order,
    # and one with a year more, each get their own years' range.
    rows = [row("2020015", year="2021"), row("2020015", year="2019"), row("2020016", year="2019"),
            row("2020016", year="2021"), row("2020017", year="2019"), row("2020017", year="2021"),
            row("2020017", year="2024"), row("2020018", year="9999"), row("2020018", year="")]
    assert [parse(g)["model_year"] for g in groups(write(tmp_path / "f.csv", rows))] \
        == ["2019-2021", "2019-2021", "2019-2024", None]


def test_a_whole_run_longer_than_pass_one_counted_loses_no_row(tmp_path):
    # The file changed between the two passes: the run holds more rows than pass one counted;
    # they go row by row, none is dropped.
    path = tmp_path / "f.csv"
    counted = count_rows(write(path, [row("2020020", year=str(1950 + n)) for n in range(SHARE_AFTER_ROWS)]))
    write(path, [row("2020020", year=str(1950 + n)) for n in range(SHARE_AFTER_ROWS + 2)])
    emitted = [g for g in group_rows(path, counted) if g["recall_number"] == "2020020"]
    assert sum(g["rows"] for g in emitted) == SHARE_AFTER_ROWS + 2
