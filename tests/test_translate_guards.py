"""Mistranslation guards as pure functions."""
from translate.guards import check, numbers

SOURCE = "The airbag inflator may rupture on 2,700 vehicles built 05/01/2024."
GOOD = "에어백 인플레이터가 2024년 5월 1일에 제작된 차량 2,700대에서 파열될 수 있습니다."


def test_good_translation_with_reordered_date_passes():
    assert check(SOURCE, GOOD, "en") is None


def test_numbers_ignore_separators_and_leading_zeros():
    assert numbers("2,700 units on 05/01/2024") == numbers("2700대 2024 5 1")


def test_dropped_number_is_named():
    assert check(SOURCE, GOOD.replace("2,700대", ""), "en") == "number missing: 2700"


def test_full_width_digits_in_japanese_count_as_numbers():
    assert check("対象台数は９，９７２台です。", "대상 대수는 9,972대입니다.", "ja") is None


def test_names_and_codes_do_not_count_against_hangul():
    assert check("Ford Motor Company", "Ford Motor Company", "en") is None
    assert check("Toyota Prius brake", "Toyota Prius 브레이크", "en") is None


def test_lowercase_english_left_in_the_output_is_not_korean():
    assert check("The brake may fail.", "The 브레이크 may fail without warning.", "en").startswith("not Korean")


def test_japanese_echo_is_blocked():
    assert check("ブレーキが効かなくなるおそれがある。", "ブレーキが効かなくなるおそれがある。", "ja") == "echo of the source"


def test_absurd_length_is_blocked():
    long_source = "The rear suspension bolt may loosen over time and fall out."
    assert check(long_source, "볼트", "en").startswith("length ratio")


def test_repetition_present_in_the_source_is_allowed():
    assert check("Beep beep beep beep warning.", "삐 삐 삐 삐 경고.", "en") is None
