"""Seed data: one working week of a small product team, with rooms, busy days and people away."""

from __future__ import annotations

from datetime import datetime, timedelta

from mcpworld.servers.envs.world import Session

from .models import Attendee, Event, OutOfOffice, Person, Room, WorkingHours

NOW = datetime(2026, 4, 13, 8, 0, 0)  # Monday 13 April 2026, 08:00
MON = NOW.replace(hour=0)


def at(day: int, clock: str) -> datetime:
    """Day 0 is Monday 13 April; `clock` is "HH:MM"."""
    hours, minutes = map(int, clock.split(":"))
    return MON + timedelta(days=day, hours=hours, minutes=minutes)


def _hours(person_id: str, start: str, end: str, days: range = range(5)) -> list[WorkingHours]:
    return [WorkingHours(person_id=person_id, weekday=d, start=start, end=end) for d in days]


def _event(eid: str, title: str, organizer: str, day: int, start: str, end: str, room: str | None,
           attendees: dict[str, str], status: str = "confirmed") -> list:
    event = Event(id=eid, title=title, organizer_id=organizer, room_id=room, start_at=at(day, start),
                  end_at=at(day, end), status=status, created_at=NOW - timedelta(days=7))
    people = [Attendee(event_id=eid, person_id=organizer, response="accepted")]
    people += [Attendee(event_id=eid, person_id=p, response=r) for p, r in attendees.items()]
    return [event, *people]


def seed(db: Session) -> None:
    db.add_all([
        Person(id="P01", name="Hannah Schmidt", email="hannah@team.example", team="Product"),
        Person(id="P02", name="Omar Haddad", email="omar@team.example", team="Engineering"),
        Person(id="P03", name="Yuki Tanaka", email="yuki@team.example", team="Design"),
        Person(id="P04", name="Lucas Moreau", email="lucas@team.example", team="Engineering"),
        Person(id="P05", name="Grace Liu", email="grace@team.example", team="Sales"),
        Person(id="P06", name="Mateo Silva", email="mateo@team.example", team="Engineering"),
        Person(id="P07", name="Emma Johansson", email="emma@team.example", team="Product"),
        Person(id="P08", name="Ravi Patel", email="ravi@team.example", team="Design"),
    ])
    db.flush()  # parents first: foreign keys are enforced row by row
    db.add_all([
        *_hours("P01", "09:00", "17:00"),
        *_hours("P02", "08:00", "16:00"),
        *_hours("P03", "10:00", "18:00", range(4)),  # no Fridays
        *_hours("P04", "09:00", "17:00"),
        *_hours("P05", "07:00", "15:00"),
        *_hours("P06", "12:00", "20:00"),
        *_hours("P07", "09:00", "17:00"),
        *_hours("P08", "09:00", "17:30"),
    ])
    db.flush()
    db.add_all([
        Room(id="RM-ATLAS", name="Atlas", floor=2, capacity=4, equipment="tv,whiteboard"),
        Room(id="RM-BOREAL", name="Boreal", floor=2, capacity=8, equipment="projector,video_conf,whiteboard"),
        Room(id="RM-CEDAR", name="Cedar", floor=3, capacity=12, equipment="projector,video_conf"),
        Room(id="RM-DUNE", name="Dune", floor=3, capacity=2, equipment=""),
        Room(id="RM-ECHO", name="Echo", floor=4, capacity=20, equipment="projector,video_conf,microphone"),
    ])
    db.flush()
    db.add_all([
        OutOfOffice(id="OOO-01", person_id="P04", start_at=at(1, "00:00"), end_at=at(3, "00:00"), reason="Vacation"),
        OutOfOffice(id="OOO-02", person_id="P07", start_at=at(3, "13:00"), end_at=at(3, "17:00"),
                    reason="Doctor's appointment"),
        OutOfOffice(id="OOO-03", person_id="P05", start_at=at(2, "00:00"), end_at=at(3, "00:00"),
                    reason="Sales conference"),
    ])
    db.flush()
    for rows in [
        _event("EV-101", "Sprint planning", "P02", 1, "10:00", "11:00", "RM-BOREAL",
               {"P03": "accepted", "P08": "needs_action"}),
        _event("EV-102", "Design review", "P03", 2, "14:00", "15:00", "RM-ATLAS",
               {"P08": "accepted", "P01": "tentative"}),
        _event("EV-103", "Customer call: Acme", "P05", 1, "13:00", "14:00", "RM-CEDAR", {"P01": "accepted"}),
        _event("EV-104", "1:1 Emma / Hannah", "P07", 3, "10:00", "10:30", "RM-DUNE", {"P01": "accepted"}),
        _event("EV-105", "Roadmap sync", "P01", 3, "15:00", "16:00", "RM-BOREAL",
               {"P02": "accepted", "P06": "accepted"}),
        _event("EV-106", "All hands", "P07", 4, "11:00", "12:00", "RM-ECHO",
               {p: "needs_action" for p in ("P01", "P02", "P04", "P05", "P06", "P08")}),
        _event("EV-107", "Retro", "P02", 0, "15:00", "16:00", "RM-BOREAL", {"P06": "declined"}, status="cancelled"),
        _event("EV-108", "Interview loop", "P08", 2, "10:00", "11:00", "RM-CEDAR", {"P02": "accepted"}),
        _event("EV-109", "Product standup", "P01", 1, "09:00", "10:00", "RM-ATLAS", {"P07": "accepted"}),
        _event("EV-110", "Lunch & learn", "P06", 3, "12:00", "13:00", "RM-ECHO", {"P04": "accepted"}),
        _event("EV-111", "Budget prep (room hold)", "P07", 2, "13:30", "15:00", "RM-BOREAL", {}),
    ]:
        db.add(rows[0])
        db.flush()
        db.add_all(rows[1:])
