import pytest
from minicalc.chunks import chunk


def test_chunk_even():
    assert chunk([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]


def test_chunk_rejects_zero():
    with pytest.raises(ValueError):
        chunk([1, 2], 0)
