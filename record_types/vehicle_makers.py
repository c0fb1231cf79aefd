"""A normalised manufacturer key: `Ford`, `FORD` and `Ford Motor Company` all become `FORD`.

Authorities spell one maker many ways (case, legal suffixes, Japanese names), which splits
facets and filters. `manufacturer_key()` maps a published name to one key with two steps:

1. **Aliases** (`ALIASES`, first match wins): a regular expression over the cleaned name (NFKC,
   upper case, single spaces) → key. Needed where names share no spelling (`トヨタ自動車株式会社`
   and `Toyota Motor Corporation`) or where step 2 would cut too much (`General Motors`).
2. **Legal and generic suffixes** (`SUFFIXES`) are cut from the end, again and again, together
   with punctuation: `Ford Motor Company` → `FORD MOTOR` → `FORD`.

What is left is the key. The published name (`manufacturer_original`) is never changed; the key
lives in its own column `recalls.manufacturer_key`, written with every stored record. To add a
maker, add one line to ALIASES with a test in tests/test_manufacturers.py. Existing rows keep
the key computed when they were last written: after changing the rules, refill them with
`refill_manufacturer_keys()`.

The table belongs to the vehicle_recall type (its declaration derives `manufacturer_key` with it
and normalises `--manufacturer` / `--filter manufacturer_key=` through it); the framework never
imports it.
"""
from __future__ import annotations

import functools
import re
import unicodedata

# (key, pattern over the cleaned upper-case name). Ordered: the first pattern that matches wins.
ALIASES: tuple[tuple[str, str], ...] = (
    # Makers that recall in Japan: the MLIT list names them in kanji or katakana (full- or
    # half-width: clean() applies NFKC first, so ｽｽﾞｷ is スズキ), other sources in Latin letters.
    ("TOYOTA", r"^TOYOTA\b|トヨタ|^LEXUS\b|レクサス"),
    ("HONDA", r"^HONDA\b|本田技研|ホンダ"),
    ("NISSAN", r"^NISSAN\b|日産|ニッサン"),
    ("MAZDA", r"^MAZDA\b|マツダ"),
    ("SUBARU", r"^SUBARU\b|スバル|富士重工"),
    ("SUZUKI", r"^SUZUKI\b|スズキ"),
    ("DAIHATSU", r"^DAIHATSU\b|ダイハツ"),
    ("MITSUBISHI FUSO", r"^MITSUBISHI FUSO\b|三菱ふそう|ミツビシフソウ"),
    ("MITSUBISHI", r"^MITSUBISHI MOTORS?\b|^MITSUBISHI$|三菱自動車|^三菱$|ミツビシ"),
    ("ISUZU", r"^ISUZU\b|いすゞ|いすず|イスズ"),
    ("HINO", r"^HINO\b|日野自動車|^日野$|^ヒノ$"),
    ("UD TRUCKS", r"^UD TRUCKS\b|^UDトラックス|^UD トラックス"),
    ("YAMAHA", r"^YAMAHA\b|ヤマハ"),
    ("KAWASAKI", r"^KAWASAKI\b|カワサキ|川崎重工|^川崎$"),
    ("MITSUOKA", r"^MITSUOKA\b|光岡"),
    ("GENERAL MOTORS", r"^GENERAL MOTORS\b|^GM\b|^G\.M\.\b|ゼネラルモーターズ|ゼネラル・モーターズ"),
    ("CHRYSLER (FCA)", r"^FCA(?![A-Z])|^CHRYSLER\b|^FIAT CHRYSLER\b|クライスラー"),
    ("CHEVROLET", r"^CHEVROLET$|シボレー"),
    ("CADILLAC", r"^CADILLAC\b|キャデラック"),
    ("JEEP", r"^JEEP\b|ジープ"),
    ("FIAT", r"^FIAT\b|フィアット"),
    ("ALFA ROMEO", r"^ALFA ROMEO\b|アルファ・?ロメオ"),
    ("FERRARI", r"^FERRARI\b|フェラーリ"),
    ("MASERATI", r"^MASERATI\b|マセラティ"),
    ("LAMBORGHINI", r"^LAMBORGHINI\b|ランボルギーニ"),
    ("DUCATI", r"^DUCATI\b|ドゥカティ|ドゥカッティ"),
    ("PIAGGIO", r"^PIAGGIO\b|ピアッジオ|^VESPA\b|ベスパ"),
    ("FORD", r"^FORD\b|フォード"),
    ("VOLKSWAGEN", r"^VOLKSWAGEN\b|^VW\b|フォルクスワーゲン"),
    ("AUDI", r"^AUDI\b|アウディ"),
    ("PORSCHE", r"^PORSCHE\b|ポルシェ"),
    ("MERCEDES-BENZ", r"^MERCEDES\b|^DAIMLER\b|メルセデス"),
    ("BMW", r"^BMW\b|ビー・?エム・?ダブリュー"),
    ("MINI", r"^MINI\b|^ミニ$"),
    ("ROLLS-ROYCE", r"^ROLLS[- ]ROYCE\b|ロールス・?ロイス"),
    ("BENTLEY", r"^BENTLEY\b|ベントレー"),
    ("JAGUAR LAND ROVER", r"^JAGUAR LAND ROVER\b|ジャガー・?ランドローバー"),
    ("JAGUAR", r"^JAGUAR\b|ジャガー"),
    ("LAND ROVER", r"^LAND ROVER\b|ランドローバー"),
    ("TRIUMPH", r"^TRIUMPH\b|トライアンフ"),
    ("HARLEY-DAVIDSON", r"^HARLEY[- ]DAVIDSON\b|ハーレー・?ダビッドソン"),
    ("VOLVO", r"^VOLVO\b|ボルボ"),
    ("PEUGEOT", r"^PEUGEOT\b|プジョー"),
    ("CITROEN", r"^CITRO[EË]N\b|シトロエン"),
    ("RENAULT", r"^RENAULT\b|ルノー"),
    ("TESLA", r"^TESLA\b|テスラ"),
    ("BYD", r"^BYD\b|ビーワイディー"),
    ("HYUNDAI", r"^HYUNDAI\b|현대자동차|^현대|ヒョンデ|ヒュンダイ"),
    ("KIA", r"^KIA\b|기아"),
    ("KTM", r"^KTM\b"),
)

# Cut from the end of a name (after punctuation is gone), repeatedly: legal forms and words
# that only say "this is a car company".
SUFFIXES: tuple[str, ...] = (
    "CO LTD", "CO", "LTD", "LIMITED", "INC", "INCORPORATED", "LLC", "L L C", "CORP", "CORPORATION",
    "COMPANY", "GMBH", "AG", "SA", "SAS", "SPA", "S P A", "PTY", "PLC", "NV", "BV", "AB", "KK",
    "USA", "US", "NORTH AMERICA", "OF AMERICA", "CANADA", "AUSTRALIA",
    "MOTOR", "MOTORS", "AUTOMOBILE", "AUTOMOBILES", "AUTOMOTIVE",
    "自動車工業", "自動車",
)
# Japanese legal forms stand before or after the name, without a space: removed wherever they are.
_JAPANESE_LEGAL_FORMS = ("株式会社", "(株)", "有限会社")

_COMPILED = tuple((key, re.compile(pattern)) for key, pattern in ALIASES)
_PUNCTUATION = re.compile(r"[.,'\"()（）・/]+")
_SUFFIX_RE = re.compile(r"(?:^|\s)(?:" + "|".join(re.escape(s) for s in sorted(SUFFIXES, key=len, reverse=True)) + r")$")


def clean(name: str) -> str:
    """NFKC (full-width letters → ASCII), upper case, one space between words."""
    return " ".join(unicodedata.normalize("NFKC", name).upper().split())


# Called for every stored row; a source publishes a few hundred distinct names at most, so the
# rule table (a regex per alias, then suffix cutting) runs once per name, not once per row.
@functools.lru_cache(maxsize=4096)
def manufacturer_key(name: str | None) -> str | None:
    """The normalised key of a published manufacturer name (None for an empty name)."""
    if name is None:
        return None
    text = clean(name)
    if not text:
        return None
    for key, pattern in _COMPILED:
        if pattern.search(text):
            return key
    for form in _JAPANESE_LEGAL_FORMS:
        text = text.replace(form, " ")
    text = " ".join(_PUNCTUATION.sub(" ", text).split())
    while True:
        cut = _SUFFIX_RE.sub("", text).strip()
        if cut == text or not cut:   # never cut a name down to nothing ("Motors Inc" stays MOTORS)
            break
        text = cut
    return text or None


def refill_manufacturer_keys(conn) -> int:
    """Recompute the stored `manufacturer_key` of every vehicle recall (after the rules
    changed). Returns the number of rows whose key changed. See `refill_derived`."""
    from basecrawler.recordtypes import get_record_type
    from basecrawler.recordtypes.derived import refill_derived

    return refill_derived(conn, get_record_type("vehicle_recall"))


__all__ = ["ALIASES", "SUFFIXES", "manufacturer_key", "refill_manufacturer_keys", "clean"]
