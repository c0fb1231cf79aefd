"""Mistranslation guards as pure functions."""
from translate.guards import check, numbers, sentences
from translate.protect import codes, mask, unmask

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


# ---- codes in any width (issue 16, point 1) --------------------------------------------------

JA_ENGINE = "４Ｖ２０型エンジンにおいて、オイル供給パイプの締付けが不足しているものがある。"
KO_ENGINE = "４Ｖ２０형 엔진에서 오일 공급 파이프의 체결이 부족한 것이 있다."


def test_full_width_model_code_is_masked_and_put_back_as_the_source_wrote_it():
    masked = mask("原動機（４Ｖ２０型エンジン）", None, "ja")
    assert masked.slots == ["４Ｖ２０"] and "４Ｖ２０" not in masked.text
    restored, lost = unmask(masked.text.replace("原動機（", "원동기(").replace("型エンジン）", "형 엔진)"), masked)
    assert restored == "원동기(４Ｖ２０형 엔진)" and lost == []


def test_full_width_code_changed_in_the_translation_is_blocked():
    assert check(JA_ENGINE, KO_ENGINE.replace("４Ｖ２０", "4B20"), "ja") == "code missing: 4V20"


def test_full_width_code_kept_or_written_in_ascii_is_accepted():
    assert check(JA_ENGINE, KO_ENGINE, "ja") is None
    assert check(JA_ENGINE, KO_ENGINE.replace("４Ｖ２０", "4V20"), "ja") is None


def test_full_width_type_designation_with_a_dash_is_one_code():
    assert codes("型式ＤＢＡ－ＺＶＷ３０の車両") == ["DBA-ZVW30"]


# ---- letter-only codes (point 2) -------------------------------------------------------------
EN_ECU = "The engine control unit (ECU) software may reduce engine power while driving."
KO_ECU = "엔진 제어 장치(ECU) 소프트웨어가 주행 중 엔진 출력을 낮출 수 있다."


def test_letter_only_code_changed_in_english_recall_text_is_blocked():
    assert check(EN_ECU, KO_ECU, "en") is None
    assert check(EN_ECU, KO_ECU.replace("ECU", "ECM"), "en") == "code missing: ECU"


def test_full_width_letter_only_codes_in_japanese_are_verified():
    source = "ハイブリッドシステムのＩＣが故障し、ＥＶ走行ができなくなるおそれがある。"
    good = "하이브리드 시스템의 ＩＣ가 고장 나 ＥＶ 주행을 할 수 없게 될 우려가 있다."
    assert check(source, good, "ja") is None
    assert check(source, good.replace("ＥＶ", "HV"), "ja") == "code missing: EV"
    assert check(source, good.replace("ＩＣ", "LSI"), "ja") == "code missing: IC"


def test_one_of_two_mentions_of_a_code_changed_is_blocked():
    source = "The ABS module may short circuit. A short in the ABS module can cause a fire."
    good = "ABS 모듈이 단락될 수 있다. ABS 모듈의 단락은 화재를 일으킬 수 있다."
    assert check(source, good, "en") is None
    assert check(source, good.replace("ABS", "ESC", 1), "en") == "code missing: ABS"


def test_plural_of_a_code_in_the_source_matches_the_code_in_korean():
    assert check("Dealers will replace both ECUs, free of charge.", "딜러가 ECU 두 개를 무상으로 교체한다.", "en") is None


def test_acronyms_in_running_text_are_masked_but_shouted_words_are_not():
    masked = mask("Owners should NOT drive until the SRS module is replaced.", None, "en")
    assert masked.slots == ["SRS"]


def test_all_capitals_component_masks_known_acronyms_only():
    assert mask("ELECTRICAL SYSTEM:ECU", None, "en").slots == ["ECU"]
    assert mask("AIR BAGS:FRONTAL", None, "en").slots == []


def test_a_code_the_glossary_renders_in_korean_need_not_survive():
    source = "The ABS warning light may illuminate."
    korean = "잠김 방지 브레이크 경고등이 켜질 수 있다."
    assert check(source, korean, "en") == "code missing: ABS"
    assert check(source, korean, "en", exempt=["ABS"]) is None


# ---- repeated output (point 3) ----------------------------------------------------------------
def test_short_translation_emitted_twice_is_blocked():
    assert check("原動機（ターボチャージャー）", "원동기(터보차저) 원동기(터보차저)", "ja").startswith("repeated output")


def test_long_translation_emitted_three_times_is_blocked():
    source = ("The fuel pump impeller may swell and deform. If the fuel pump fails, the engine may stall "
              "while driving, increasing the risk of a crash.")
    good = "연료 펌프 임펠러가 부풀어 변형될 수 있다. 연료 펌프가 고장 나면 주행 중 엔진이 멈춰 충돌 위험이 커질 수 있다."
    assert check(source, good, "en") is None
    assert check(source, " ".join([good] * 3), "en") == "repeated output: the same text 3 times"


def test_a_sentence_repeated_inside_the_translation_is_blocked():
    source = "全車両、燃料ポンプを対策品に交換する。また、燃料ホースを点検する。"
    first, second = "전 차량, 연료 펌프를 대책품으로 교환한다.", "또한 연료 호스를 점검한다."
    assert check(source, f"{first} {second}", "ja") is None
    assert check(source, f"{first} {first} {second}", "ja").startswith("repeated sentence")


def test_a_source_that_repeats_itself_may_be_translated_with_repetition():
    assert check("ガタガタ", "덜컹덜컹", "ja") is None


# ---- truncation (point 4) ---------------------------------------------------------------------
def test_short_japanese_component_cut_to_two_syllables_is_blocked():
    assert check("原動機（ターボチャージャー）", "원동기(터보차저)", "ja") is None
    assert check("原動機（ターボチャージャー）", "원동", "ja").startswith("too short")


def test_short_english_component_cut_to_one_syllable_is_blocked():
    assert check("Steering column", "스티어링 칼럼", "en") is None
    assert check("Steering column", "스티", "en").startswith("too short")


def test_only_the_first_of_three_sentences_kept_is_blocked():
    source = ("The transmission control module software may command an unintended downshift while the vehicle "
              "travels at highway speed. A downshift can cause a crash. Owners should drive carefully.")
    first = "변속기 제어 모듈 소프트웨어가 차량이 고속도로 속도로 주행하는 중에 의도하지 않은 저단 변속을 명령할 수 있다."
    rest = " 저단 변속은 충돌을 일으킬 수 있다. 소유자는 주의해서 운전해야 한다."
    assert check(source, first + rest, "en") is None
    assert check(source, first, "en") == "sentences missing: 1 of 3"


def test_sentences_are_not_cut_after_abbreviations_or_inside_decimals():
    text = "Kia America, Inc. is recalling 1.6 L engines sold in the U.S. market. Dealers will fix them."
    assert len(sentences(text)) == 2
    assert len(sentences("原動機において、異音が発生する。そのため、停止するおそれがある。")) == 2


def test_a_glossary_term_excuses_only_its_own_codes():
    source = "The EV battery level sensor may fail."
    korean = "배터리 잔량 센서가 고장 날 수 있다."
    assert check(source, korean, "en", exempt=["level sensor"]) == "code missing: EV"


def test_a_full_stop_inside_japanese_quotes_does_not_end_the_sentence():
    assert len(sentences("警告灯が点灯し、「販売店で点検してください。」と表示されることがある。")) == 1


def test_a_company_name_may_be_rendered_by_its_short_name():
    assert check("本田技研工業株式会社", "혼다", "ja") is None
    assert check("Ford Motor Company", "포드", "en") is None


def test_a_number_joined_to_a_word_is_translated_not_kept_as_a_code():
    assert codes("The 12-volt battery of 4-wheel drive models (recall 24V-123)") == ["24V-123"]
    assert check("The 12-volt battery cable may chafe.", "12볼트 배터리 케이블이 마모될 수 있다.", "en") is None
