"""Seed data: one working week of a small product team, with rooms, busy days and people away."""

from __future__ import annotations

from datetime import datetime, timedelta

from mcpworld.world import Session

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


PEOPLE = [  # id, name, team
    ("P01", "Hannah Schmidt", "Product"),
    ("P02", "Omar Haddad", "Engineering"),
    ("P03", "Yuki Tanaka", "Design"),
    ("P04", "Lucas Moreau", "Engineering"),
    ("P05", "Grace Liu", "Sales"),
    ("P06", "Mateo Silva", "Engineering"),
    ("P07", "Emma Johansson", "Product"),
    ("P08", "Ravi Patel", "Design"),
]
ROOMS = [  # id, name, floor, capacity, equipment
    ("RM-ATLAS", "Atlas", 2, 4, "tv,whiteboard"),
    ("RM-BOREAL", "Boreal", 2, 8, "projector,video_conf,whiteboard"),
    ("RM-CEDAR", "Cedar", 3, 12, "projector,video_conf"),
    ("RM-DUNE", "Dune", 3, 2, ""),
    ("RM-ECHO", "Echo", 4, 20, "projector,video_conf,microphone"),
]


def seed(db: Session) -> None:
    db.add_all([Person(id=pid, name=name, email=f"{name.split()[0].lower()}@team.example", team=team)
                for pid, name, team in PEOPLE])
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
    db.add_all([Room(id=rid, name=name, floor=floor, capacity=capacity, equipment=equipment)
                for rid, name, floor, capacity, equipment in ROOMS])
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
