"""Lists the server answers a page at a time, read to the end."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from ._rpc import call

T = TypeVar("T")


async def read_all(
    method: Callable[..., Awaitable[Any]],
    request: Any,
    items: Callable[[Any], Iterable[T]],
    *,
    retry_for: float,
) -> list[T]:
    """Calls `method` with `request` for each page of a list in turn, from the first (its
    `page_token` as given, empty for the first page) until the server answers an empty
    `next_page_token`, and returns the `items` of every page, in order. A page may be shorter
    than asked (its payloads filled the response) without being the last: only the empty token
    ends the list. Each page is one `call`, made again with the same token while the server is
    unavailable (for up to `retry_for` seconds)."""
    out: list[T] = []
    while True:
        r = await call(method, request, retry_for=retry_for)
        out.extend(items(r))
        if not r.next_page_token:
            return out
        request.page_token = r.next_page_token
