"""sync/handoff.py: frames handed over whole, events taken one by one, in order (pure)."""

from __future__ import annotations

import queue
import threading

import pytest

from migrator.sync.handoff import Handoff


def test_events_come_out_one_by_one_in_order_across_frames() -> None:
    h = Handoff()
    h.put([1, 2, 3])
    h.put([4])
    assert not h.empty()
    assert [h.get(), h.get()] == [1, 2]
    assert not h.empty()  # the rest of the frame in hand counts
    assert [h.get(), h.get()] == [3, 4]
    assert h.empty()
    with pytest.raises(queue.Empty):
        h.get()
    with pytest.raises(queue.Empty):
        h.get(timeout=0.01)


def test_a_full_handoff_makes_the_reader_wait() -> None:
    h = Handoff(frames=2)
    h.put([1])
    h.put([2])
    with pytest.raises(queue.Full):
        h.put([3], timeout=0.01)
    assert h.get() == 1  # a slot is free again
    h.put([3], timeout=0.01)
    assert [h.get(), h.get()] == [2, 3]


def test_a_waiting_get_takes_a_frame_put_meanwhile() -> None:
    h = Handoff()
    threading.Timer(0.05, lambda: h.put(["late", "frame"])).start()
    assert h.get(timeout=5) == "late"
    assert h.get() == "frame"
