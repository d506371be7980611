"""Team calendar state: people and their working hours, rooms, events with attendees, out-of-office blocks."""

from __future__ import annotations

from sqlmodel import Field

from mcpworld.world import Timestamp, world_base

Base = world_base()


class Person(Base, table=True):
    id: str = Field(primary_key=True)  # e.g. P01
    name: str
    email: str = Field(unique=True)
    team: str


class WorkingHours(Base, table=True):
    __tablename__ = "working_hours"
    person_id: str = Field(foreign_key="person.id", primary_key=True)
    weekday: int = Field(primary_key=True, ge=0, le=6)  # 0 = Monday ... 6 = Sunday
    start: str  # "HH:MM"
    end: str  # "HH:MM"


class Room(Base, table=True):
    id: str = Field(primary_key=True)  # e.g. RM-ATLAS
    name: str = Field(unique=True)
    floor: int
    capacity: int = Field(ge=1)
    equipment: str = ""  # comma-separated: tv, whiteboard, projector, video_conf, microphone


class Event(Base, table=True):
    id: str = Field(primary_key=True)  # e.g. EV-101
    title: str
    description: str = ""
    organizer_id: str = Field(foreign_key="person.id")
    room_id: str | None = Field(default=None, foreign_key="room.id")
    start_at: Timestamp
    end_at: Timestamp
    status: str = "confirmed"  # confirmed | cancelled
    created_at: Timestamp


class Attendee(Base, table=True):
    event_id: str = Field(foreign_key="event.id", primary_key=True)
    person_id: str = Field(foreign_key="person.id", primary_key=True)
    response: str = "needs_action"  # needs_action | accepted | tentative | declined


class OutOfOffice(Base, table=True):
    __tablename__ = "out_of_office"
    id: str = Field(primary_key=True)
    person_id: str = Field(foreign_key="person.id")
    start_at: Timestamp
    end_at: Timestamp
    reason: str = ""
