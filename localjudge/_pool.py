"""A bounded thread pool whose results are handled, in completion order, by the calling thread.

Shared by ``OpenAICompatBackend.score_batch`` (``localjudge.backends._batch``) and
``evaluate(..., max_workers=N)`` (``localjudge.judges.runner``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, TypeVar

__all__ = ["run_in_pool"]

T = TypeVar("T")
R = TypeVar("R")


def run_in_pool(fn: Callable[[T], R], items: Sequence[T], *, max_workers: int,
                on_result: Callable[[R], None], show_progress: bool = False,
                desc: str = "items") -> None:
    """Call ``fn(item)`` for every item on at most ``max_workers`` threads.

    ``on_result`` runs in the calling thread, once per item, as each finishes (so one slow
    item never holds back the others' records). On any exception in the calling thread --
    one raised by ``fn`` or ``on_result``, or Ctrl-C -- items not yet started are cancelled,
    and what ``on_result`` already handled stays handled.

    Args:
        fn: the work; it should turn per-item failures into results rather than raise.
        items: the inputs (nothing happens when empty).
        max_workers: threads at most (>= 1); never more than there are items.
        on_result: handler of each result.
        show_progress: tqdm progress bar on stderr, labelled ``desc``.
    """
    if not items:
        return
    pool = ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(items))))
    try:
        futures = [pool.submit(fn, x) for x in items]
        done: Iterable[Any] = as_completed(futures)
        if show_progress:
            from tqdm import tqdm

            done = tqdm(done, total=len(futures), desc=desc, unit="item")
        for fut in done:
            on_result(fut.result())
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
