"""Team calendar tools. Business rules live here, each with its own message."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Literal

from sqlmodel import col, select

from mcpworld.world import (
    Session,
    Timestamp,
    ToolError,
    fetch,
    new_id,
    now,
    tool,
)

from .models import Attendee, Event, OutOfOffice, Person, Room, WorkingHours

Response = Literal["accepted", "tentative", "declined"]
Equipment = Literal["tv", "whiteboard", "projector", "video_conf", "microphone"]

WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MAX_LENGTH = timedelta(hours=8)



def _clock(text: str) -> time:
    hours, minutes = map(int, text.split(":"))
    return time(hours, minutes)


def _day_bounds(day: date) -> tuple[datetime, datetime]:
    start = datetime.combine(day, time())
    return start, start + timedelta(days=1)


def _fmt(moment: datetime) -> str:
    return moment.strftime("%a %Y-%m-%d %H:%M")


def _hours_on(db: Session, person_id: str, day: date) -> WorkingHours | None:
    return db.get(WorkingHours, (person_id, day.weekday()))


def _check_times(db: Session, start_at: datetime, end_at: datetime) -> None:
    if end_at <= start_at:
        raise ToolError("an event must end after it starts")
    if start_at < now(db):
        raise ToolError(f"{_fmt(start_at)} is in the past (it is now {_fmt(now(db))})")
    if end_at.date() != start_at.date() and end_at != datetime.combine(start_at.date() + timedelta(days=1), time()):
        raise ToolError("an event must start and end on the same day")
    if end_at - start_at > MAX_LENGTH:
        raise ToolError("an event can last at most 8 hours")


def _check_working_hours(db: Session, organizer: Person, start_at: datetime, end_at: datetime) -> None:
    hours = _hours_on(db, organizer.id, start_at.date())
    if hours is None:
        raise ToolError(f"{organizer.name} does not work on {WEEKDAYS[start_at.weekday()]}s: events must be "
                        "within the organizer's working hours")
    day = start_at.date()
    if start_at < datetime.combine(day, _clock(hours.start)) or end_at > datetime.combine(day, _clock(hours.end)):
        raise ToolError(f"{_fmt(start_at)}-{end_at:%H:%M} is outside {organizer.name}'s working hours "
                        f"({hours.start}-{hours.end} on {WEEKDAYS[start_at.weekday()]}s): events must be within "
                        "the organizer's working hours")


def _away(db: Session, person_id: str, start_at: datetime, end_at: datetime) -> OutOfOffice | None:
    return db.exec(select(OutOfOffice).where(OutOfOffice.person_id == person_id, OutOfOffice.start_at < end_at,
                                             OutOfOffice.end_at > start_at)).first()


def _check_present(db: Session, person: Person, start_at: datetime, end_at: datetime) -> None:
    block = _away(db, person.id, start_at, end_at)
    if block is not None:
        raise ToolError(f"{person.name} is out of office from {_fmt(block.start_at)} to {_fmt(block.end_at)} "
                        f"({block.reason or 'away'}): they cannot be invited to an event in that time")


def _room_clash(db: Session, room_id: str, start_at: datetime, end_at: datetime,
                exclude: str | None = None) -> Event | None:
    query = select(Event).where(Event.room_id == room_id, Event.status == "confirmed", Event.start_at < end_at,
                                Event.end_at > start_at)
    if exclude is not None:
        query = query.where(Event.id != exclude)
    return db.exec(query).first()


def _check_room(db: Session, room: Room, start_at: datetime, end_at: datetime, people: int,
                exclude: str | None = None) -> None:
    if people > room.capacity:
        raise ToolError(f"room {room.name} seats {room.capacity}; {people} people would not fit")
    clash = _room_clash(db, room.id, start_at, end_at, exclude)
    if clash is not None:
        raise ToolError(f"room {room.name} is already booked from {_fmt(clash.start_at)} to {clash.end_at:%H:%M} "
                        f"({clash.title}, {clash.id})")


def _attendees(db: Session, event_id: str) -> list[Attendee]:
    return list(db.exec(select(Attendee).where(Attendee.event_id == event_id).order_by(Attendee.person_id)))


def _organized(db: Session, actor_id: str, event_id: str) -> Event:
    """The event, live and in the future, and `actor_id` is its organizer."""
    actor = fetch(db, Person, actor_id, "person")
    event = fetch(db, Event, event_id, "event")
    if event.organizer_id != actor_id:
        organizer = db.get(Person, event.organizer_id)
        raise ToolError(f"only the organizer ({organizer.name if organizer else event.organizer_id}) can change "
                        f"or cancel event {event_id}; {actor.name} is not its organizer")
    if event.status == "cancelled":
        raise ToolError(f"event {event_id} is cancelled")
    if event.start_at < now(db):
        raise ToolError(f"event {event_id} has already started or taken place")
    return event


def _event_view(db: Session, event: Event) -> dict:
    room = db.get(Room, event.room_id) if event.room_id else None
    people = db.exec(select(Attendee, Person).join(Person, col(Attendee.person_id) == Person.id)
                     .where(Attendee.event_id == event.id).order_by(Attendee.person_id)).all()
    return {**event.model_dump(), "room": room.name if room else None,
            "attendees": [{"person_id": p.id, "name": p.name, "response": a.response,
                           "organizer": p.id == event.organizer_id} for a, p in people]}


def _busy(db: Session, person_id: str, start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
    events = db.exec(select(Event).join(Attendee, col(Attendee.event_id) == Event.id).where(
        Attendee.person_id == person_id, Attendee.response != "declined", Event.status == "confirmed",
        Event.start_at < end, Event.end_at > start))
    blocks = db.exec(select(OutOfOffice).where(OutOfOffice.person_id == person_id, OutOfOffice.start_at < end,
                                               OutOfOffice.end_at > start))
    return [(e.start_at, e.end_at) for e in events] + [(b.start_at, b.end_at) for b in blocks]


@tool
def find_person(db: Session, query: str) -> list[Person]:
    """Find people whose name or e-mail contains `query` (case-insensitive)."""
    text = query.strip().lower()
    if not text:
        raise ToolError("give part of a name or e-mail address to search for")
    return [p for p in db.exec(select(Person).order_by(Person.id)) if text in p.name.lower() or text in p.email]


@tool
def get_person(db: Session, person_id: str) -> dict:
    """Get a person's profile, weekly working hours and out-of-office blocks that have not ended yet."""
    person = fetch(db, Person, person_id, "person")
    hours = db.exec(select(WorkingHours).where(WorkingHours.person_id == person_id).order_by(WorkingHours.weekday))
    blocks = db.exec(select(OutOfOffice).where(OutOfOffice.person_id == person_id, OutOfOffice.end_at > now(db))
                     .order_by(OutOfOffice.start_at))
    return {**person.model_dump(),
            "working_hours": [{"day": WEEKDAYS[h.weekday], "start": h.start, "end": h.end} for h in hours],
            "out_of_office": [b.model_dump() for b in blocks]}


@tool
def list_out_of_office(db: Session, day: date) -> list[dict]:
    """List everyone who is out of office for at least part of `day`, with the block's times and reason."""
    start, end = _day_bounds(day)
    rows = db.exec(select(OutOfOffice, Person).join(Person, col(OutOfOffice.person_id) == Person.id)
                   .where(OutOfOffice.start_at < end, OutOfOffice.end_at > start).order_by(OutOfOffice.start_at))
    return [{**b.model_dump(), "name": p.name} for b, p in rows]


@tool
def get_schedule(db: Session, person_id: str, day: date) -> dict:
    """A person's day: working hours, confirmed events they are invited to (with their response and room),
    and out-of-office blocks."""
    person = fetch(db, Person, person_id, "person")
    start, end = _day_bounds(day)
    hours = _hours_on(db, person_id, day)
    rows = db.exec(select(Event, Attendee).join(Attendee, col(Attendee.event_id) == Event.id).where(
        Attendee.person_id == person_id, Event.status == "confirmed", Event.start_at < end, Event.end_at > start)
        .order_by(Event.start_at)).all()
    blocks = db.exec(select(OutOfOffice).where(OutOfOffice.person_id == person_id, OutOfOffice.start_at < end,
                                               OutOfOffice.end_at > start))
    events = []
    for event, attendee in rows:
        room = db.get(Room, event.room_id) if event.room_id else None
        events.append({"id": event.id, "title": event.title, "start_at": event.start_at, "end_at": event.end_at,
                       "room": room.name if room else None, "organizer_id": event.organizer_id,
                       "response": attendee.response})
    return {"person_id": person.id, "name": person.name, "day": day, "weekday": WEEKDAYS[day.weekday()],
            "working_hours": {"start": hours.start, "end": hours.end} if hours else None,
            "events": events, "out_of_office": [b.model_dump() for b in blocks]}


@tool
def get_event(db: Session, event_id: str) -> dict:
    """Get an event: time, room, organizer, status and every attendee with their response."""
    return _event_view(db, fetch(db, Event, event_id, "event"))


@tool
def list_rooms(db: Session, min_capacity: int = 1, equipment: list[Equipment] | None = None) -> list[Room]:
    """List meeting rooms, smallest first, seating at least `min_capacity` and having all `equipment` listed."""
    need = set(equipment or [])
    rooms = db.exec(select(Room).where(Room.capacity >= min_capacity).order_by(Room.capacity, Room.name))
    return [r for r in rooms if need <= set(filter(None, r.equipment.split(",")))]


@tool
def room_bookings(db: Session, room_id: str, day: date) -> dict:
    """List a room's confirmed bookings on `day`, earliest first."""
    room = fetch(db, Room, room_id, "room")
    start, end = _day_bounds(day)
    events = db.exec(select(Event).where(Event.room_id == room_id, Event.status == "confirmed",
                                         Event.start_at < end, Event.end_at > start).order_by(Event.start_at))
    return {**room.model_dump(), "day": day,
            "bookings": [{"event_id": e.id, "title": e.title, "start_at": e.start_at, "end_at": e.end_at}
                         for e in events]}


@tool
def find_free_slots(db: Session, person_ids: list[str], day: date, duration_minutes: int,
                    room_id: str | None = None) -> dict:
    """Find the windows on `day` when everyone in `person_ids` is working, not out of office and not in a
    confirmed event they have not declined (and, given `room_id`, the room is free), at least
    `duration_minutes` long. Windows before the current time are left out."""
    if not person_ids:
        raise ToolError("give at least one person")
    if not 5 <= duration_minutes <= 480:
        raise ToolError("duration_minutes must be between 5 and 480")
    start, end = _day_bounds(day)
    window_start, window_end = max(start, now(db)), end
    busy: list[tuple[datetime, datetime]] = []
    for pid in dict.fromkeys(person_ids):
        person = fetch(db, Person, pid, "person")
        hours = _hours_on(db, pid, day)
        if hours is None:
            return {"day": day, "windows": [], "note": f"{person.name} does not work on {WEEKDAYS[day.weekday()]}s"}
        window_start = max(window_start, datetime.combine(day, _clock(hours.start)))
        window_end = min(window_end, datetime.combine(day, _clock(hours.end)))
        busy += _busy(db, pid, start, end)
    if room_id is not None:
        fetch(db, Room, room_id, "room")
        busy += [(e.start_at, e.end_at) for e in db.exec(select(Event).where(
            Event.room_id == room_id, Event.status == "confirmed", Event.start_at < end, Event.end_at > start))]
    windows, cursor = [], window_start
    for b_start, b_end in sorted(busy):
        if b_start > cursor:
            windows.append((cursor, min(b_start, window_end)))
        cursor = max(cursor, b_end)
    windows.append((cursor, window_end))
    need = timedelta(minutes=duration_minutes)
    return {"day": day, "windows": [{"start": s, "end": e} for s, e in windows if e - s >= need]}


@tool(writes=True, destructive=False)
def create_event(db: Session, actor_id: str, title: str, start_at: Timestamp, end_at: Timestamp,
                 attendee_ids: list[str] | None = None, room_id: str | None = None, description: str = "") -> dict:
    """Schedule an event organized by `actor_id`, inviting `attendee_ids` (the organizer is added as accepted).

    Refused when the time is in the past, longer than 8 hours or spans days; outside the organizer's working
    hours that day; when an invitee is out of office then; or when the room is too small for everyone or is
    already booked.
    """
    organizer = fetch(db, Person, actor_id, "person")
    if not title.strip():
        raise ToolError("an event needs a title")
    _check_times(db, start_at, end_at)
    _check_working_hours(db, organizer, start_at, end_at)
    invitees = [fetch(db, Person, pid, "person") for pid in dict.fromkeys(attendee_ids or []) if pid != actor_id]
    for person in [organizer, *invitees]:
        _check_present(db, person, start_at, end_at)
    if room_id is not None:
        _check_room(db, fetch(db, Room, room_id, "room"), start_at, end_at, 1 + len(invitees))
    event = Event(id=new_id(db, "EV-"), title=title.strip(), description=description.strip(), organizer_id=actor_id,
                  room_id=room_id, start_at=start_at, end_at=end_at, created_at=now(db))
    db.add(event)
    db.flush()  # the event row before its attendees (foreign keys)
    db.add(Attendee(event_id=event.id, person_id=actor_id, response="accepted"))
    db.add_all([Attendee(event_id=event.id, person_id=p.id) for p in invitees])
    db.flush()
    return _event_view(db, event)


@tool(writes=True, idempotent=True)
def reschedule_event(db: Session, actor_id: str, event_id: str, start_at: Timestamp, end_at: Timestamp) -> dict:
    """Move an event to a new time, keeping its room; other attendees' responses reset to needs_action.

    Only the organizer may reschedule. Refused on the same grounds as create_event: past or over-long times,
    outside the organizer's working hours, an attendee out of office, or the room booked at the new time.
    """
    event = _organized(db, actor_id, event_id)
    _check_times(db, start_at, end_at)
    _check_working_hours(db, fetch(db, Person, actor_id, "person"), start_at, end_at)
    attendees = _attendees(db, event_id)
    for a in attendees:
        _check_present(db, fetch(db, Person, a.person_id, "person"), start_at, end_at)
    if event.room_id is not None:
        _check_room(db, fetch(db, Room, event.room_id, "room"), start_at, end_at, len(attendees), exclude=event_id)
    event.start_at, event.end_at = start_at, end_at
    for a in attendees:
        if a.person_id != actor_id:
            a.response = "needs_action"
    db.flush()
    return _event_view(db, event)


@tool(writes=True, idempotent=True)
def change_room(db: Session, actor_id: str, event_id: str, room_id: str | None) -> dict:
    """Move an event to another room (or to no room with null). Only the organizer may; the new room must
    seat every attendee and be free for the event's time."""
    event = _organized(db, actor_id, event_id)
    if room_id == event.room_id:
        raise ToolError(f"event {event_id} is already in that room")
    if room_id is not None:
        room = fetch(db, Room, room_id, "room")
        _check_room(db, room, event.start_at, event.end_at, len(_attendees(db, event_id)), exclude=event_id)
    event.room_id = room_id
    db.flush()
    return _event_view(db, event)


@tool(writes=True)
def cancel_event(db: Session, actor_id: str, event_id: str) -> dict:
    """Cancel an upcoming event, freeing its room. Only the organizer may cancel it."""
    event = _organized(db, actor_id, event_id)
    event.status = "cancelled"
    db.flush()
    return _event_view(db, event)


@tool(writes=True, destructive=False)
def add_attendee(db: Session, actor_id: str, event_id: str, person_id: str) -> dict:
    """Invite one more person to an event. Only the organizer may; refused when the person is out of office
    during the event or the event's room would be over capacity."""
    event = _organized(db, actor_id, event_id)
    person = fetch(db, Person, person_id, "person")
    attendees = _attendees(db, event_id)
    if any(a.person_id == person_id for a in attendees):
        raise ToolError(f"{person.name} is already invited to event {event_id}")
    _check_present(db, person, event.start_at, event.end_at)
    if event.room_id is not None:
        room = fetch(db, Room, event.room_id, "room")
        if len(attendees) + 1 > room.capacity:
            raise ToolError(f"room {room.name} seats {room.capacity} and event {event_id} already has "
                            f"{len(attendees)} attendees: move it to a bigger room first")
    db.add(Attendee(event_id=event_id, person_id=person_id))
    db.flush()
    return _event_view(db, event)


@tool(writes=True)
def remove_attendee(db: Session, actor_id: str, event_id: str, person_id: str) -> dict:
    """Take a person off an event's guest list. Only the organizer may, and cannot remove themselves."""
    event = _organized(db, actor_id, event_id)
    if person_id == actor_id:
        raise ToolError("the organizer cannot be removed from their own event; cancel it instead")
    attendee = db.get(Attendee, (event_id, person_id))
    if attendee is None:
        raise ToolError(f"person {person_id} is not invited to event {event_id}")
    db.delete(attendee)
    db.flush()
    return _event_view(db, event)


@tool(writes=True, destructive=False, idempotent=True)
def respond_to_invite(db: Session, person_id: str, event_id: str, response: Response) -> Attendee:
    """Record a person's answer (accepted, tentative or declined) to an upcoming event they are invited to.

    The organizer cannot decline their own event (they should cancel it).
    """
    fetch(db, Person, person_id, "person")
    event = fetch(db, Event, event_id, "event")
    attendee = db.get(Attendee, (event_id, person_id))
    if attendee is None:
        raise ToolError(f"person {person_id} is not invited to event {event_id}")
    if event.status == "cancelled":
        raise ToolError(f"event {event_id} is cancelled")
    if event.start_at < now(db):
        raise ToolError(f"event {event_id} has already started or taken place")
    if person_id == event.organizer_id and response != "accepted":
        raise ToolError("the organizer cannot decline their own event; cancel it instead")
    attendee.response = response
    return attendee


@tool(writes=True, destructive=False)
def add_out_of_office(db: Session, person_id: str, start_at: Timestamp, end_at: Timestamp,
                      reason: str = "") -> dict:
    """Block time as out of office; the person's invitations to other people's events in that time are
    declined automatically.

    Refused when the block overlaps one they already have, ends in the past, or covers an event the person
    organizes (cancel or move that event first).
    """
    person = fetch(db, Person, person_id, "person")
    if end_at <= start_at:
        raise ToolError("the block must end after it starts")
    if end_at <= now(db):
        raise ToolError("the block would already be over")
    existing = _away(db, person_id, start_at, end_at)
    if existing is not None:
        raise ToolError(f"{person.name} is already out of office from {_fmt(existing.start_at)} to "
                        f"{_fmt(existing.end_at)}")
    rows = db.exec(select(Event, Attendee).join(Attendee, col(Attendee.event_id) == Event.id).where(
        Attendee.person_id == person_id, Event.status == "confirmed", Event.start_at < end_at,
        Event.end_at > start_at).order_by(Event.start_at)).all()
    own = [e for e, _ in rows if e.organizer_id == person_id]
    if own:
        raise ToolError(f"{person.name} organizes {own[0].title} ({own[0].id}, {_fmt(own[0].start_at)}) in that "
                        "time: cancel or move it before blocking the time")
    block = OutOfOffice(id=new_id(db, "OOO-"), person_id=person_id, start_at=start_at, end_at=end_at,
                        reason=reason.strip())
    db.add(block)
    for _, attendee in rows:
        attendee.response = "declined"
    return {"block": block.model_dump(), "declined_events": [e.id for e, _ in rows]}


TOOLS = [find_person, get_person, list_out_of_office, get_schedule, get_event, list_rooms, room_bookings,
         find_free_slots, create_event, reschedule_event, change_room, cancel_event, add_attendee, remove_attendee,
         respond_to_invite, add_out_of_office]
