"""The embedded store splits a write's cells by family before it touches any record."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nutchy.store.embedded import EmbeddedStore, _group
from nutchy.store.schema import RowUpdate

# real families, a family the table lacks, and families that sort next to each other
_FAMILIES = [b"f", b"s", b"mk", b"mtdt", b"h", b"ol", b"il", b"p", b"stm", b"f0", b"fx", b"o"]
_columns = st.builds(
    lambda family, qualifier: family + b":" + qualifier,
    st.sampled_from(_FAMILIES),
    st.binary(max_size=6),
)
_cells = st.dictionaries(_columns, st.binary(max_size=4), max_size=60)


@given(_cells)
def test_cells_are_grouped_by_the_family_before_the_first_colon(cells):
    expected: dict[bytes, dict[bytes, bytes]] = {}
    for column, value in cells.items():
        expected.setdefault(column.split(b":", 1)[0], {})[column] = value
    assert _group(cells) == expected


def test_a_row_of_many_families_reads_back_cell_for_cell(tmp_path):
    cells = {b"f:st": b"\x00\x00\x00\x02", b"f:cnt": b"<html>", b"s:s": b"\x3f\x80\x00\x00"}
    cells |= {f"h:H{i}".encode(): b"v" for i in range(20)}
    cells |= {f"ol:http://e.com/{i}".encode(): b"a" for i in range(30)}
    cells |= {b"mk:_gnmrk_": b"b1", b"mk:dist": b"0", b"mtdt:_csh_": b"\x00\x00\x00\x00"}
    with EmbeddedStore(tmp_path / "t.sqlite") as store:
        store.create()
        store.write([RowUpdate(b"com.e:http/", dict(cells))])
        assert store.get(b"com.e:http/") == cells
