import pytest
from minicalc.numbers import clamp, percent


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_clamp_below():
    assert clamp(-3, 0, 10) == 0


def test_percent():
    assert percent(1, 3) == 33.3


def test_percent_zero_whole():
    with pytest.raises(ZeroDivisionError):
        percent(1, 0)
