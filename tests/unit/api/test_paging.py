"""app.api.paging: pages in a stable order, resumed after the last key served."""

from __future__ import annotations

import pytest
from fastapi import HTTPException
from hypothesis import given
from hypothesis import strategies as st

from app.api.paging import PageRequest, decode_token, encode_token, page


def key(item: tuple[int, str]) -> tuple[int, str]:
    return item


def all_pages(items: list[tuple[int, str]], limit: int) -> list[list[tuple[int, str]]]:
    pages, token = [], None
    while True:
        got, token = page(items, key, PageRequest(limit, token), "things")
        pages.append(got)
        if token is None:
            return pages


items_strategy = st.lists(
    st.tuples(st.integers(-5, 5), st.text("abc", max_size=3)), unique=True, max_size=40
)


@given(items_strategy, st.integers(1, 10))
def test_pages_concatenated_are_the_sorted_list(items: list[tuple[int, str]], limit: int) -> None:
    pages = all_pages(items, limit)
    assert [x for p in pages for x in p] == sorted(items)
    assert all(len(p) <= limit for p in pages)
    assert all(pages[:-1]), "only the last page may be empty"


@given(items_strategy, items_strategy, st.integers(1, 10))
def test_a_change_between_pages_serves_no_item_twice_and_keeps_survivors(
    before: list[tuple[int, str]], after: list[tuple[int, str]], limit: int
) -> None:
    first, token = page(before, key, PageRequest(limit, None), "things")
    rest: list[tuple[int, str]] = []
    while token is not None:
        got, token = page(after, key, PageRequest(limit, token), "things")
        rest += got
    served = first + rest
    assert len(served) == len(set(served))
    # An item in both lists is served once, on the first page or after it.
    for item in set(before) & set(after):
        assert item in served


def test_no_limit_is_everything_and_no_token() -> None:
    assert page([(2, "b"), (1, "a")], key, PageRequest(), "things") == ([(1, "a"), (2, "b")], None)


def test_a_token_is_bound_to_its_list() -> None:
    token = encode_token("gate", (1, "a"))
    assert decode_token("gate", token) == (1, "a")
    with pytest.raises(HTTPException) as exc:
        decode_token("workloads", token)
    assert exc.value.status_code == 400 and "another list" in exc.value.detail


@pytest.mark.parametrize("token", ["!!!", "e30", "bm90IGpzb24", encode_token("things", ())[:-2]])
def test_a_malformed_token_is_a_400(token: str) -> None:
    with pytest.raises(HTTPException) as exc:
        page([(1, "a")], key, PageRequest(1, token), "things")
    assert exc.value.status_code == 400


def test_a_token_of_other_key_types_is_a_400() -> None:
    token = encode_token("things", ("x", 1))
    with pytest.raises(HTTPException) as exc:
        page([(1, "a")], key, PageRequest(1, token), "things")
    assert exc.value.status_code == 400 and "order" in exc.value.detail
