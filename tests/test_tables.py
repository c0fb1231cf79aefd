"""CLI tables pad by terminal display width (wcwidth), so Japanese and Korean cells line up."""
from basecrawler.reading.tables import clip, display_width, render_table


def test_wide_characters_count_two_columns():
    assert display_width("abc") == 3
    assert display_width("トヨタ") == 6 and display_width("현대") == 4
    assert display_width("ｱｲ") == 2                   # half-width katakana: one column each


def test_columns_line_up_in_display_columns_with_cjk_cells():
    out = render_table(["maker", "units"], [["トヨタ自動車", 12], ["Ford", 3], ["현대자동차", 100]], align=["<", ">"])
    lines = out.splitlines()
    assert lines[0].startswith("maker") and set(lines[1].replace(" ", "")) == {"-"}
    # Every line ends at the same display column (units right-aligned), whatever the script.
    assert len({display_width(line) for line in lines}) == 1
    assert lines[2].endswith(" 12") and lines[4].endswith("100")


def test_clip_cuts_by_columns_and_marks_the_cut():
    assert clip("ブレーキ", 4) == "ブ…"
    assert display_width(clip("ブレーキホース", 9)) <= 9
    assert clip("short", 10) == "short"


def test_none_is_an_empty_cell_and_no_trailing_spaces():
    out = render_table(["a", "b"], [[None, "x"], ["long value", None]])
    assert all(line == line.rstrip() for line in out.splitlines())
    assert out.splitlines()[2].startswith(" " * len("long value"))
