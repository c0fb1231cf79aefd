"""`--country` accepts names and codes (issue 21.6): `Japan`, `jp`, `日本`, `독일` → a code;
anything no source publishes is refused with the known list, never a filter that silently finds
nothing. A source of many jurisdictions (OECD GlobalRecalls) makes every country one it may
publish: `--country Bulgaria` finds its Bulgarian alerts."""
import json
from pathlib import Path

import httpx
import pytest

from basecrawler.cli import main
from basecrawler.errors import ConfigError
from basecrawler.formats.countries import country_code, country_codes
from basecrawler.pipeline.registry import discover, known_countries
from basecrawler.testing import fast_settings
from sources.oecd import FEED_PATH, OecdGlobalRecallsCrawler

FEED = Path(__file__).resolve().parents[1] / "fixtures" / "oecd" / "feed_day4.xml"

KNOWN = ["AU", "CA", "EU", "JP", "US"]


@pytest.mark.parametrize("typed, code", [
    ("Japan", "JP"), ("jp", "JP"), ("JP", "JP"), (" japan ", "JP"), ("日本", "JP"), ("일본", "JP"), ("ＪＰ", "JP"),
    ("United States", "US"), ("usa", "US"), ("U.S.", "US"), ("미국", "US"),
    ("canada", "CA"), ("Australia", "AU"), ("호주", "AU"), ("European Union", "EU"), ("Europe", "EU"), ("eu", "EU"),
])
def test_names_and_codes_give_the_code(typed, code):
    assert country_code(typed, KNOWN) == code


def test_unknown_name_is_a_config_error_listing_the_known_ones():
    with pytest.raises(ConfigError) as caught:
        country_code("Narnia", KNOWN)
    assert str(caught.value) == ("unknown country 'Narnia'; known: AU (Australia), CA (Canada), "
                                 "EU (European Union), JP (Japan), US (United States)")


def test_a_real_country_no_source_publishes_says_so():
    with pytest.raises(ConfigError, match=r"^no source publishes country KR \(South Korea\); known: AU"):
        country_code("Korea", KNOWN)


def test_the_known_list_is_the_registrys_and_a_portal_of_many_countries_opens_it():
    sources = discover()
    assert any(cls.many_countries for cls in sources.values())   # oecd
    assert known_countries() is None
    # Without it: the declared countries (a source of no one country, pypi, adds nothing).
    single = {cls.country for cls in sources.values() if cls.country and not cls.many_countries}
    assert {"JP", "US", "CA"} <= single
    assert country_code("Bulgaria", None) == "BG"
    with pytest.raises(ConfigError, match=r"^no source publishes country BG \(Bulgaria\)"):
        country_code("Bulgaria", sorted(single))


@pytest.mark.parametrize("typed, code", [
    ("Germany", "DE"), ("독일", "DE"), ("ドイツ", "DE"), ("Allemagne", "DE"), ("Deutschland", "DE"),
    ("Chinese Taipei", "TW"), ("대만", "TW"), ("Korea (Republic of)", "KR"), ("bg", "BG"), ("유럽 연합", "EU"),
])
def test_any_country_by_its_name_in_the_readers_and_publishers_languages(typed, code):
    assert country_code(typed, None) == code


@pytest.mark.parametrize("typed", ["Narnia", "ZZ", "1", "", "Europe and Asia"])
def test_what_is_no_country_is_refused_even_when_any_country_is_known(typed):
    with pytest.raises(ConfigError, match="unknown country"):
        country_code(typed, None)


def test_search_by_a_country_only_the_portal_publishes_finds_its_records(db_path, capsys):
    def feed(request):
        return httpx.Response(200 if request.url.path == FEED_PATH else 404, content=FEED.read_bytes(),
                              headers={"content-type": "application/rss+xml; charset=UTF-8"})
    crawler = OecdGlobalRecallsCrawler(db_path, mode="full", settings=fast_settings(db_path),
                                       transport=httpx.MockTransport(feed))
    assert crawler.run().status == "succeeded"
    capsys.readouterr()
    assert main(["--db", db_path, "search", "--type", "product_alert", "--country", "Bulgaria", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found and {row["country"] for row in found} == {"BG"}
    assert main(["--db", db_path, "search", "--type", "product_alert", "--country", "Narnia"]) == 2


def test_repeated_and_comma_separated_values():
    assert country_codes(["Japan,us", "jp"], KNOWN) == ("JP", "US")
    assert country_codes(None, KNOWN) == ()
