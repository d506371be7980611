"""Numbers and dates in English prose (mcpworld/worlds/words.py): what is read is what is written."""

from __future__ import annotations

import datetime

import pytest

from mcpworld.worlds.words import date_forms, number_forms, numbers_in


@pytest.mark.parametrize(("text", "expected"), [
    ("It costs 1,250.50 dollars.", 1250.5),
    ("about 5.3k", 5300.0),
    ("1.2 million", 1_200_000.0),
    ("twenty-one seats", 21.0),
    ("three hundred and five", 305.0),
    ("two thousand", 2000.0),
])
def test_numbers_are_read_however_written(text: str, expected: float) -> None:
    assert numbers_in(text)[0] == expected


def test_every_written_form_of_a_number_reads_back() -> None:
    for form in number_forms(5310.0):
        assert any(abs(n - 5310.0) <= 0.02 * 5310.0 for n in numbers_in(form)), form
    assert number_forms(5310.0) == ["5,310.00", "about 5.3k"]


def test_a_date_is_named_in_english_whatever_the_locale() -> None:
    assert date_forms(datetime.date(2026, 9, 5)) == {"2026-09-05", "september 5", "5 september", "sep 5"}
