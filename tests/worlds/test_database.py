"""An episode keeps the rows its tool calls loaded: reading a row again costs no query, and never reads stale data.

Every test plays the airline world in process (`WorldRuntime.call`, what every server face runs) and watches the
episode's own SQLite connection: the statements it runs, and what a later call returns after a write made by a
tool, by a trigger, by a rolled-back call, or beside the session (as `mcpworld world audit` edits rows).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcpworld.worlds.database import MAX_HELD_ROWS
from mcpworld.worlds.host import load_runtime
from mcpworld.worlds.runtime import Episode, WorldRuntime

FLIGHT = "MW101-0603"  # 120 economy seats, 40 sold; reservation ZFA04Y (basic, booked 2026-06-01) is on it


@pytest.fixture(scope="module")
def runtime() -> WorldRuntime:
    return load_runtime("airline")


@pytest.fixture
def episode(runtime: WorldRuntime) -> Iterator[Episode]:
    ep = runtime.fork("cancel-within-24h", 0)
    yield ep
    ep.close()


def get_flight(runtime: WorldRuntime, ep: Episode) -> dict:
    result = runtime.call(ep, "get_flight", {"flight_id": FLIGHT})
    assert result.error is None, result.error
    return result.value


def statements(ep: Episode) -> list[str]:
    ran: list[str] = []
    ep.conn.set_trace_callback(ran.append)
    return ran


def test_a_row_read_again_costs_no_query(runtime: WorldRuntime, episode: Episode) -> None:
    first = get_flight(runtime, episode)
    ran = statements(episode)
    again = [get_flight(runtime, episode) for _ in range(5)]
    assert again == [first] * 5
    assert ran == []  # not even BEGIN/COMMIT: nothing was read from the database or written to it


def test_a_write_beside_the_session_is_seen_by_the_next_call(runtime: WorldRuntime, episode: Episode) -> None:
    assert get_flight(runtime, episode)["status"] == "scheduled"
    episode.conn.execute("UPDATE flight SET status = 'delayed', economy_sold = 119 WHERE id = ?", (FLIGHT,))
    now = get_flight(runtime, episode)
    assert (now["status"], now["economy_left"]) == ("delayed", 1)
    episode.conn.execute("DELETE FROM flight WHERE id = 'MW103-0603'")
    result = runtime.call(episode, "get_flight", {"flight_id": "MW103-0603"})
    assert result.error is not None and "MW103-0603" in result.error


def test_what_a_trigger_writes_is_seen_after_the_tool_that_fired_it(runtime: WorldRuntime, episode: Episode) -> None:
    get_flight(runtime, episode)  # held from here on
    episode.conn.execute("CREATE TRIGGER delay_on_cancel AFTER UPDATE OF status ON reservation "
                         f"BEGIN UPDATE flight SET status = 'delayed' WHERE id = '{FLIGHT}'; END")
    cancelled = runtime.call(episode, "cancel_reservation", {"reservation_id": "ZFA04Y", "reason": "change_of_plan"})
    assert cancelled.error is None, cancelled.error
    after = get_flight(runtime, episode)
    assert after["status"] == "delayed"  # the trigger's write, which the ORM never saw
    assert after["economy_left"] == 120 - 40 + 1  # and the tool's own: the seat released


def test_a_rolled_back_call_leaves_no_trace_in_later_reads(runtime: WorldRuntime, episode: Episode) -> None:
    before = get_flight(runtime, episode)
    # take_seats runs (the flight object changes in memory), then the 40.00 gift card cannot pay: rolled back
    refused = runtime.call(episode, "book_flight", {"customer_id": "C004", "flight_id": FLIGHT, "cabin": "economy",
                                                    "fare": "basic", "passengers": 2, "payment_id": "PM-KJ-GIFT"})
    assert refused.error is not None and "gift card" in refused.error
    assert get_flight(runtime, episode) == before
    assert not any(t.inserted or t.updated or t.deleted_keys for t in runtime.diff(episode).tables.values())


def test_rows_held_are_bounded(runtime: WorldRuntime, episode: Episode) -> None:
    big = [f"F{i:04d}" for i in range(MAX_HELD_ROWS + 50)]
    episode.conn.executemany(
        "INSERT INTO flight (id, number, origin, destination, departs_at, arrives_at, status, economy_seats, "
        "business_seats, economy_sold, business_sold, economy_price, business_price) VALUES "
        "(?, 'X1', 'AAA', 'BBB', '2026-07-01 09:00:00.000000', '2026-07-01 10:00:00.000000', 'scheduled', "
        "10, 1, 0, 0, 1.0, 2.0)", [(f,) for f in big])
    result = runtime.call(episode, "search_flights", {"origin": "AAA", "destination": "BBB", "day": "2026-07-01"})
    assert result.error is None and len(result.value) == len(big)
    assert episode.session is not None
    assert len(episode.session.identity_map) <= MAX_HELD_ROWS
