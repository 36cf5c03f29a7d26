"""Stopping a gateway process ends: no background task may outlive the cancel that stop() sends."""

from __future__ import annotations

import asyncio

import pytest

from modelgate.gateway.runtime import Runtime, cancel_and_wait
from modelgate.server import prepare
from tests.gateway_harness import harness_settings


@pytest.mark.parametrize("turns", range(4))
async def test_stop_ends_when_a_change_wakes_the_refresh_loop_as_it_stops(tmp_path, turns):
    """A change notice (pub/sub, the change marker) that wakes the snapshot refresh loop in the same
    turns of the event loop as stop() cancels it: the cancel must win, or stop() waits on the loop
    for ever (Python 3.11's asyncio.wait_for drops a cancel that meets its inner wait's wake-up)."""
    settings = harness_settings(tmp_path)
    await prepare(settings)
    runtime = Runtime(settings)
    await runtime.start()
    runtime.refresh_soon()
    for _ in range(turns):
        await asyncio.sleep(0)
    async with asyncio.timeout(30):  # a bound on a hang, not a speed target: stop() takes well under 1 s
        await runtime.stop()


async def test_tasks_that_drop_a_cancel_are_cancelled_again():
    """redis-py's socket writes (asyncio.wait_for on Python 3.11) drop a cancel that meets their end,
    and a loop issuing a command at that moment goes on: stop() must still end it."""
    steps = []

    async def loop_dropping_one_cancel():
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            steps.append("dropped")  # as wait_for does when its inner step has just finished
        await asyncio.sleep(3600)

    task = asyncio.create_task(loop_dropping_one_cancel())
    await asyncio.sleep(0)
    async with asyncio.timeout(30):  # a bound on a hang, not a speed target
        await cancel_and_wait([task])
    assert task.cancelled() and steps == ["dropped"]
