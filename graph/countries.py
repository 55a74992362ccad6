"""ISO 3166-1 country normalisation (``normalise: iso_country``), on the ``pycountry`` tables.

A value may be an alpha-2, alpha-3 or numeric code, an English short, common or official name, or
a country's name in any language pycountry ships a translation for ("Deutschland", "Allemagne");
the stored form is the alpha-2 code. Names that two languages give to different countries are
dropped rather than guessed.
"""

from __future__ import annotations

import gettext
from functools import lru_cache
from pathlib import Path

import pycountry


def iso_country(text: str) -> str | None:
    """The ISO 3166-1 alpha-2 code ``text`` names, or ``None`` when it names no country."""
    key = text.strip().casefold()
    if not key:
        return None
    try:
        return pycountry.countries.lookup(key).alpha_2
    except LookupError:
        return _translated_names().get(key)


@lru_cache(maxsize=1)
def _translated_names() -> dict[str, str]:
    """Every translated country name (casefolded) -> alpha-2, without the ambiguous ones."""
    names: dict[str, str] = {}
    ambiguous: set[str] = set()
    locales = Path(pycountry.LOCALES_DIR)
    for catalogue in sorted(locales.glob("*/LC_MESSAGES/iso3166-1.mo")):
        translation = gettext.translation("iso3166-1", str(locales), languages=[catalogue.parts[-3]])
        for country in pycountry.countries:
            for name in _english_names(country):
                key = translation.gettext(name).casefold()
                if names.setdefault(key, country.alpha_2) != country.alpha_2:
                    ambiguous.add(key)
    for key in ambiguous:
        del names[key]
    return names


def _english_names(country: object) -> set[str]:
    return {name for field in ("name", "common_name", "official_name")
            if (name := getattr(country, field, None))}
