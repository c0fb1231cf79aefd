"""#13 points 1, 2 and 10 at unit level: the shared decoder, the almost-XML list reader and the
MLIT list PDF whose text fields are label + text lines. (Black-box runs through the CLI are in
tests/reliability/test_quirks.py.)"""
from pathlib import Path

import pytest

from basecrawler.formats.textcodec import Undecodable, Utf8XmlReader, decode_text, file_encoding
from basecrawler.formats.xmlsafe import ListUnreadable, UnsafeXml, iter_xml, parse_bytes, read_list

QUIRKS = Path(__file__).resolve().parents[1] / "fixtures" / "quirks"
RDF = ('<?xml version="1.0" encoding="Shift_JIS"?>\r\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"'
       ' xmlns="http://purl.org/rss/1.0/">\r\n{items}</rdf:RDF>\r\n')


def item(title):
    return f'<item rdf:about="x"><title>{title}</title><link>http://www.mlit.go.jp/a.html</link></item>\r\n'


# ---- decoding: declaration first, content decides ---------------------------------------------
def test_utf8_body_under_a_latin1_declaration_is_read_as_utf8_with_a_note():
    decoded = decode_text('<?xml version="1.0" encoding="ISO-8859-1"?><a>Müller</a>'.encode("utf-8"))
    assert "Müller" in decoded.text and "MÃ¼ller" not in decoded.text
    assert decoded.notes == ["declared iso8859-1 but the body is valid UTF-8; read as UTF-8"]


def test_a_true_latin1_body_keeps_its_declaration():
    decoded = decode_text("Müller".encode("latin-1"), header="ISO-8859-1")
    assert (decoded.text, decoded.notes) == ("Müller", [])


def test_shift_jis_written_as_windows_31j_is_read_without_a_warning():
    decoded = decode_text("第①回 リコール".encode("cp932"), header="Shift_JIS")
    assert (decoded.text, decoded.encoding, decoded.notes) == ("第①回 リコール", "cp932", [])


def test_http_charset_wrong_but_document_declaration_right():
    body = '<?xml version="1.0" encoding="Shift_JIS"?><t>リコール①</t>'.encode("cp932")
    decoded = decode_text(body, header="utf-8")
    assert "リコール①" in decoded.text
    assert any("not valid utf-8" in note for note in decoded.notes)


def test_bom_wins_and_double_encoded_text_is_repaired():
    assert decode_text(b"\xef\xbb\xbf[1]", header="iso-8859-1").text == "[1]"
    assert decode_text("MÃ¼ller GmbH".encode("utf-8")).text == "Müller GmbH"


def test_a_body_invalid_in_every_candidate_is_refused_not_guessed():
    with pytest.raises(Undecodable):
        decode_text("リコール".encode("shift_jis"), header="utf-8", sniff=False, default="utf-8")


def test_streamed_file_declared_latin1_but_utf8_is_re_encoded(tmp_path):
    path = tmp_path / "r.xml"
    path.write_bytes('<?xml version="1.0" encoding="ISO-8859-1"?><r><b>Müller</b></r>'.encode("utf-8"))
    assert file_encoding(path) == ("iso8859-1", "utf-8")
    with Utf8XmlReader(path, "utf-8") as reader:
        texts = [e.text for _, e in iter_xml(reader, events=("end",)) if e.tag == "b"]
    assert texts == ["Müller"]
    latin = tmp_path / "l.xml"
    latin.write_bytes('<?xml version="1.0" encoding="ISO-8859-1"?><r>Müller</r>'.encode("latin-1"))
    assert file_encoding(latin) == ("iso8859-1", None)


def test_streamed_utf8_file_with_a_latin1_byte_keeps_every_other_character(tmp_path):
    from basecrawler.formats.textcodec import LEGACY_BYTES

    path = tmp_path / "m.xml"
    path.write_bytes(b'<?xml version="1.0" encoding="UTF-8"?><r><b>Citro\xebn</b><b>\xc3\xa9t\xc3\xa9</b></r>')
    assert file_encoding(path) == ("utf-8", LEGACY_BYTES)
    with Utf8XmlReader(path, "utf-8", errors=LEGACY_BYTES) as reader:
        texts = [e.text for _, e in iter_xml(reader, events=("end",)) if e.tag == "b"]
    assert texts == ["Citroën", "été"]


# ---- lists that are almost XML ------------------------------------------------------------------
def titles(listed):
    return [node.findtext("{http://purl.org/rss/1.0/}title") for node in listed.items]


def test_bare_ampersand_is_escaped_and_reported():
    body = RDF.format(items=item("道路局 A & B") + item("リコールの届出について（X）")).encode("cp932")
    listed = read_list(body, "item")
    assert titles(listed) == ["道路局 A & B", "リコールの届出について（X）"]
    assert listed.repairs == ["escaped 1 bare '&'"] and listed.lost == []


def test_control_characters_are_removed_and_reported():
    body = RDF.format(items=item("a\x01b") + item("c")).encode("cp932")
    listed = read_list(body, "item")
    assert titles(listed) == ["ab", "c"]
    assert listed.repairs == ["removed 1 control character(s) XML does not allow"]


def test_an_unrepairable_item_is_lost_alone_with_its_raw_text():
    body = RDF.format(items=item("壊れ<た") + item("リコールの届出について（X）")).encode("cp932")
    listed = read_list(body, "item")
    assert titles(listed) == ["リコールの届出について（X）"]
    assert len(listed.lost) == 1 and "壊れ<た" in listed.lost[0][0]
    assert "read item by item: 1 read, 1 lost" in listed.repairs[-1]


def test_dtd_still_refused_and_nothing_readable_is_unreadable():
    with pytest.raises(UnsafeXml):
        read_list(b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x "y">]><r><item>&x;</item></r>', "item")
    with pytest.raises(ListUnreadable):
        read_list(b"<r><item>a</r>", "item")


# ---- #13 point 10: MLIT list with label + text lines ---------------------------------------------
def test_label_line_list_pdf_gives_component_cause_and_remedy():
    from basecrawler.formats.pdf import read_pdf
    from sources.jp import records_from_list

    pages = [page.to_dict() for page in read_pdf(QUIRKS / "jp_list_label_lines.pdf")]
    records, rejected = records_from_list({"pages": pages, "press_date": "2024-10-03"})
    assert rejected == [] and len(records) == 1
    record = records[0]
    assert record["recall_number"] == "5120"
    assert record["component_original"] == "制動装置（ブレーキホース）"
    assert record["defect_cause_original"] == (
        "ブレーキホースの取り回しが不適切なため、ハンドルを最大に切った状態を繰り返すと、"
        "ブレーキホースがフレームと干渉して摩耗することがある。そのため、そのままの状態で使用を続けると、"
        "ブレーキホースに亀裂が生じてブレーキ液が漏れ、最悪の場合、制動力が低下するおそれがある。")
    assert record["remedy_original"] == "全車両、ブレーキホースを対策品に交換するとともに、取り回しを修正する。"
    assert record["extra"]["notifier"] == "スズキ株式会社"
    assert record["affected_units"] == 5100
    assert record["model_original"] == "ジムニー、ジムニー シエラ"


def test_label_lines_are_found_numbered_or_with_text_on_the_same_line():
    from sources.jp import text_line_fields

    page = {"tables": [[["車名", "型式"], ["スズキ", "X"]]], "text": "\n".join([
        "リコール届出番号 1 リコール開始日 令和6年1月1日",
        "（１）不具合の部位（部品名）：燃料装置",
        "■ 改善措置の内容",
        "全車両、交換する。",
        "車名 型式",
        "スズキ X",
    ])}
    assert text_line_fields(page) == [{"component": "燃料装置", "remedy": "全車両、交換する。"}]


def test_press_page_sent_in_shift_jis_is_decoded_once():
    from basecrawler.formats.textcodec import decode_text
    from sources.jp import parse_press_page

    body = ('<html><head><meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS"></head><body>'
            '<p class="date mb20">令和6年10月3日</p><p class="linkArrow01"><a href="/a.pdf">リコール届出一覧表</a></p>'
            '</body></html>').encode("shift_jis")
    page = parse_press_page(decode_text(body, default="utf-8").text, "https://www.mlit.go.jp/report/press/x.html")
    assert page.list_pdf == "https://www.mlit.go.jp/a.pdf"
    assert str(page.date) == "2024-10-03"


def test_broken_bytes_after_a_byte_order_mark_are_undecodable_not_a_crash():
    # A UTF-8 BOM promises UTF-8; \xff\xfe after it is not: the callers (get_text, read_list)
    # turn Undecodable into a dead letter, a bare UnicodeDecodeError would be a traceback.
    import pytest
    from basecrawler.errors import Undecodable
    from basecrawler.formats.textcodec import decode_text

    with pytest.raises(Undecodable, match="byte-order mark"):
        decode_text(b"\xef\xbb\xbf<feed>\xff\xfe</feed>")


# ---- a DTD is refused from the bytes, whatever libxml2 makes of it ----------------------------
# An internal subset libxml2 itself rejects (an unterminated entity declaration): without the
# prolog check the streamed reader would report a syntax error, and the report would be filed as
# broken rather than refused as unsafe.
BROKEN_SUBSET = b'<?xml version="1.0"?>\n<!DOCTYPE r [ <!ENTITY bomb "&bomb;" <!ENTITY x >]><r><b>1</b></r>'


def test_a_streamed_file_with_a_dtd_libxml2_cannot_parse_is_refused_as_unsafe(tmp_path):
    path = tmp_path / "r.xml"
    path.write_bytes(BROKEN_SUBSET)
    with pytest.raises(UnsafeXml, match="declares a DTD"):
        list(iter_xml(str(path)))
    with Utf8XmlReader(path, "utf-8") as reader, pytest.raises(UnsafeXml, match="declares a DTD"):
        list(iter_xml(reader))


def test_the_prolog_check_reads_only_the_prolog_and_leaves_doctype_text_in_content_alone(tmp_path):
    path = tmp_path / "r.xml"
    body = b'<?xml version="1.0"?><r><b>&lt;!DOCTYPE is text here</b><c><![CDATA[<!DOCTYPE x>]]></c></r>'
    path.write_bytes(body)
    with Utf8XmlReader(path, "utf-8") as reader:
        assert [e.tag for _, e in iter_xml(reader, events=("end",))] == ["b", "c", "r"]
    assert [e.tag for _, e in iter_xml(str(path), events=("end",))] == ["b", "c", "r"]


def test_a_whole_document_with_a_dtd_libxml2_cannot_parse_is_refused_as_unsafe():
    with pytest.raises(UnsafeXml, match="declares a DTD"):
        parse_bytes(BROKEN_SUBSET)
