"""`--country` accepts names and codes (issue 21.6): `Japan`, `jp`, `日本` → `JP`; anything no
source publishes is refused with the known list, never a filter that silently finds nothing."""
import pytest

from basecrawler.formats.countries import country_code, country_codes, known_countries
from basecrawler.errors import ConfigError
from basecrawler.pipeline.registry import discover

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


def test_default_known_list_is_the_registry():
    # A source of no one country (pypi) adds nothing.
    assert known_countries() == sorted({cls.country for cls in discover().values() if cls.country})
    first = sorted((c for c in discover().values() if c.country), key=lambda c: c.source)[0]
    assert country_code(first.country.lower()) == first.country


def test_repeated_and_comma_separated_values():
    assert country_codes(["Japan,us", "jp"], KNOWN) == ("JP", "US")
    assert country_codes(None, KNOWN) == ()
