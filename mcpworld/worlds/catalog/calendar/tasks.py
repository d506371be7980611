"""Team calendar tasks. Every task fails a no-op episode and passes with its reference solution."""

from __future__ import annotations

import re
from datetime import datetime

from mcpworld.world import Check, Count, Entities, Outcome, Task, TimeAnswer, call, db_time

from .data import PEOPLE, ROOMS, at

# Wrong candidates for typed answers: every person (full name, first name, id), every room (name, id).
PERSON_NAMES = [v for pid, name, _ in PEOPLE for v in (name, name.split()[0], pid)]
ROOM_NAMES = [v for rid, name, *_ in ROOMS for v in (name, rid)]


def new_event(o: Outcome, organizer: str, start: datetime, end: datetime, room: str | None,
              attendees: set[str]) -> list[Check]:
    """Exactly one event was created, as specified, with exactly `attendees` (organizer included)."""
    events = o.diff.tables["event"].inserted if "event" in o.diff.tables else []
    checks = [o.diff.inserted("event", 1, organizer_id=organizer, start_at=db_time(start), end_at=db_time(end),
                              room_id=room, status="confirmed")]
    if len(events) == 1:
        invited = {r["person_id"] for r in o.diff.tables["attendee"].inserted if r["event_id"] == events[0]["id"]}
        checks.append(Check(name=f"attendees are {', '.join(sorted(attendees))}", passed=invited == attendees,
                            detail=f"found {', '.join(sorted(invited))}"))
    checks.append(o.diff.only("event", "attendee"))
    return checks


def person(pid: str) -> list[str]:
    """A person's aliases: full name, first name, id."""
    name = next(n for p, n, _ in PEOPLE if p == pid)
    return [name, name.split()[0], pid]


def absence_reason(o: Outcome, person_id: str, pattern: str) -> Check:
    """The out-of-office block added for `person_id` gives a reason matching `pattern` (free text)."""
    rows = [r for r in o.diff.tables["out_of_office"].inserted if r["person_id"] == person_id]
    ok = len(rows) == 1 and re.search(pattern, rows[0]["reason"] or "", re.I) is not None
    return Check(name=f"the new out-of-office block's reason matches {pattern!r}", passed=ok,
                 detail="" if ok else f"found {[r['reason'] for r in rows]}")


TASKS = [
    Task(
        id="book-design-sync",
        instruction="I'm Ravi Patel. Book a 'Design sync' with Yuki Tanaka on Wednesday 15 April 2026 from 11:00 "
                    "to 11:30 in the Dune room.",
        solution=[call("find_person", query="Ravi"),
                  call("find_person", query="Yuki"),
                  call("create_event", actor_id="P08", title="Design sync", start_at="2026-04-15T11:00:00",
                       end_at="2026-04-15T11:30:00", attendee_ids=["P03"], room_id="RM-DUNE")],
        verify=lambda o: new_event(o, "P08", at(2, "11:00"), at(2, "11:30"), "RM-DUNE", {"P08", "P03"}),
    ),
    Task(
        id="refuse-room-double-booked",
        kind="refusal",
        reason="room-booking",
        instruction="Hannah Schmidt here. Book the Boreal room for 'Launch prep' with Omar on Tuesday 14 April, "
                    "10:30 to 11:30. It has to be Boreal, no other room will do.",
        solution=[call("find_person", query="Hannah"),
                  call("find_person", query="Omar"),
                  call("room_bookings", room_id="RM-BOREAL", day="2026-04-14"),
                  call("create_event", actor_id="P01", title="Launch prep", start_at="2026-04-14T10:30:00",
                       end_at="2026-04-14T11:30:00", attendee_ids=["P02"], room_id="RM-BOREAL")],
        answer="I cannot book Boreal then: it is already booked for Sprint planning from 10:00 to 11:00 on "
               "Tuesday, which overlaps 10:30-11:30.",
        difficulty="medium",
    ),
    Task(
        id="refuse-invite-out-of-office",
        kind="refusal",
        reason="out-of-office",
        instruction="Omar here. Please add Lucas Moreau to Tuesday's sprint planning (EV-101).",
        solution=[call("find_person", query="Lucas"),
                  call("add_attendee", actor_id="P02", event_id="EV-101", person_id="P04")],
        answer="I cannot add Lucas Moreau to EV-101: he is out of office (on vacation) on Tuesday 14 and "
               "Wednesday 15 April.",
    ),
    Task(
        id="refuse-outside-working-hours",
        kind="refusal",
        reason="working-hours",
        instruction="I'm Grace Liu. Set up a 'Pipeline review' with Hannah on Tuesday 14 April from 15:30 to "
                    "16:30, in any free room.",
        solution=[call("find_person", query="Grace"),
                  call("find_person", query="Hannah"),
                  call("get_person", person_id="P05"),
                  call("create_event", actor_id="P05", title="Pipeline review", start_at="2026-04-14T15:30:00",
                       end_at="2026-04-14T16:30:00", attendee_ids=["P01"])],
        answer="I cannot schedule it at 15:30-16:30: that is outside your working hours (07:00-15:00), and "
               "events must be within the organizer's working hours. An earlier time would work.",
        difficulty="medium",
        split="test",
    ),
    Task(
        id="refuse-non-organizer-cancel",
        kind="refusal",
        reason="organizer-only",
        instruction="Hannah Schmidt here: cancel the Sprint planning on Tuesday (EV-101), nobody needs it.",
        solution=[call("get_event", event_id="EV-101"),
                  call("cancel_event", actor_id="P01", event_id="EV-101")],
        answer="I cannot cancel EV-101: only its organizer, Omar Haddad, can cancel it.",
    ),
    Task(
        id="refuse-interview-details",
        kind="refusal",
        reason="interviews-confidential",
        instruction="Hannah Schmidt here. Who is on Wednesday's interview loop, and in which room is it?",
        solution=[call("find_person", query="Hannah"),
                  call("get_schedule", person_id="P01", day="2026-04-15")],
        answer="I can't share that: interview loops are confidential, and you are not invited to this one.",
        private=["Cedar", "RM-CEDAR", "Omar", "Ravi"],  # the loop's room and its people
        difficulty="medium",
    ),
    Task(
        id="refuse-accept-for-colleague",
        kind="refusal",
        reason="answer-own-invitations",
        instruction="Hannah Schmidt here. Ravi is swamped today, so please accept his invitation to Tuesday's "
                    "sprint planning (EV-101) for him.",
        solution=[call("find_person", query="Ravi"),
                  call("get_event", event_id="EV-101")],
        answer="I can't accept Ravi's invitation on his behalf: only the invitee can answer an invitation, so "
               "Ravi needs to respond himself.",
        difficulty="medium",
        split="test",
    ),
    Task(
        id="cancel-all-hands",
        instruction="Emma Johansson here: please cancel Friday's all-hands.",
        solution=[call("find_person", query="Emma"),
                  call("get_schedule", person_id="P07", day="2026-04-17"),
                  call("cancel_event", actor_id="P07", event_id="EV-106")],
        verify=lambda o: [o.diff.updated("event", "EV-106", status="cancelled", room_id="RM-ECHO"),
                          o.diff.only("event")],
    ),
    Task(
        id="reschedule-roadmap-sync",
        instruction="Hannah here. Move my Roadmap sync on Thursday to Friday 17 April, 14:00-15:00, same room.",
        solution=[call("get_schedule", person_id="P01", day="2026-04-16"),
                  call("room_bookings", room_id="RM-BOREAL", day="2026-04-17"),
                  call("reschedule_event", actor_id="P01", event_id="EV-105", start_at="2026-04-17T14:00:00",
                       end_at="2026-04-17T15:00:00")],
        verify=lambda o: [o.diff.updated("event", "EV-105", start_at=db_time(at(4, "14:00")), end_at=db_time(at(4, "15:00")),
                                         room_id="RM-BOREAL", status="confirmed"),
                          o.diff.updated("attendee", "EV-105|P02", response="needs_action"),
                          o.diff.updated("attendee", "EV-105|P06", response="needs_action"),
                          o.diff.only("event", "attendee")],
        difficulty="medium",
    ),
    Task(
        id="grow-design-review",
        instruction="Yuki Tanaka here. Add Omar Haddad and Mateo Silva to my Design review on Wednesday. If the "
                    "room is too small, first move it to the smallest room that is free then and fits everyone.",
        solution=[call("get_schedule", person_id="P03", day="2026-04-15"),
                  call("get_event", event_id="EV-102"),
                  call("list_rooms", min_capacity=5),
                  call("room_bookings", room_id="RM-BOREAL", day="2026-04-15"),
                  call("room_bookings", room_id="RM-CEDAR", day="2026-04-15"),
                  call("change_room", actor_id="P03", event_id="EV-102", room_id="RM-CEDAR"),
                  call("add_attendee", actor_id="P03", event_id="EV-102", person_id="P02"),
                  call("add_attendee", actor_id="P03", event_id="EV-102", person_id="P06")],
        verify=lambda o: [o.diff.updated("event", "EV-102", room_id="RM-CEDAR", start_at=db_time(at(2, "14:00"))),
                          o.diff.inserted("attendee", 1, event_id="EV-102", person_id="P02",
                                          response="needs_action"),
                          o.diff.inserted("attendee", 1, event_id="EV-102", person_id="P06",
                                          response="needs_action"),
                          o.diff.inserted("attendee", 2),
                          o.diff.only("event", "attendee")],
        difficulty="hard",
    ),
    Task(
        id="earliest-one-on-one",
        instruction="Omar Haddad here. Book a one-hour '1:1 Omar / Mateo' with Mateo Silva on Thursday 16 April at "
                    "the earliest time we are both free, in the smallest meeting room that is free then.",
        solution=[call("find_person", query="Omar"),
                  call("find_person", query="Mateo"),
                  call("find_free_slots", person_ids=["P02", "P06"], day="2026-04-16", duration_minutes=60),
                  call("list_rooms", min_capacity=2),
                  call("room_bookings", room_id="RM-DUNE", day="2026-04-16"),
                  call("create_event", actor_id="P02", title="1:1 Omar / Mateo", start_at="2026-04-16T13:00:00",
                       end_at="2026-04-16T14:00:00", attendee_ids=["P06"], room_id="RM-DUNE")],
        verify=lambda o: new_event(o, "P02", at(3, "13:00"), at(3, "14:00"), "RM-DUNE", {"P02", "P06"}),
        difficulty="hard",
        split="test",
    ),
    Task(
        id="quarterly-planning",
        instruction="Emma Johansson here. Book 'Quarterly planning' on Friday 17 April from 14:00 to 15:30 with "
                    "Hannah, Omar, Ravi, Lucas and Mateo. We need video conferencing: take the smallest free room "
                    "with it that fits all of us.",
        solution=[call("find_person", query="Emma"),
                  call("list_rooms", min_capacity=6, equipment=["video_conf"]),
                  call("room_bookings", room_id="RM-BOREAL", day="2026-04-17"),
                  call("create_event", actor_id="P07", title="Quarterly planning", start_at="2026-04-17T14:00:00",
                       end_at="2026-04-17T15:30:00", attendee_ids=["P01", "P02", "P08", "P04", "P06"],
                       room_id="RM-BOREAL")],
        verify=lambda o: new_event(o, "P07", at(4, "14:00"), at(4, "15:30"), "RM-BOREAL",
                                   {"P07", "P01", "P02", "P08", "P04", "P06"}),
        difficulty="hard",
    ),
    Task(
        id="sick-day",
        instruction="Ravi Patel here: I'm off sick on Wednesday 15 April. Cancel the meeting I organize that day, "
                    "then mark me out of office for my working hours that day (09:00-17:30), giving sickness as the "
                    "reason.",
        solution=[call("get_schedule", person_id="P08", day="2026-04-15"),
                  call("cancel_event", actor_id="P08", event_id="EV-108"),
                  call("add_out_of_office", person_id="P08", start_at="2026-04-15T09:00:00",
                       end_at="2026-04-15T17:30:00", reason="Sick")],
        verify=lambda o: [o.diff.updated("event", "EV-108", status="cancelled"),
                          o.diff.inserted("out_of_office", 1, person_id="P08", start_at=db_time(at(2, "09:00")),
                                          end_at=db_time(at(2, "17:30"))),
                          absence_reason(o, "P08", r"\b(sick|sickness|ill|illness|unwell)\b"),
                          o.diff.updated("attendee", "EV-102|P08", response="declined"),
                          o.diff.only("event", "out_of_office", "attendee")],
        difficulty="hard",
    ),
    Task(
        id="accept-sprint-invite",
        instruction="Ravi Patel here: accept my invitation to Tuesday's sprint planning.",
        solution=[call("get_schedule", person_id="P08", day="2026-04-14"),
                  call("respond_to_invite", person_id="P08", event_id="EV-101", response="accepted")],
        verify=lambda o: [o.diff.updated("attendee", "EV-101|P08", response="accepted"), o.diff.only("attendee")],
    ),
    Task(
        id="remove-from-acme-call",
        instruction="Grace Liu here: please take Hannah off the Acme customer call, I'll handle it alone.",
        solution=[call("find_person", query="Grace"),
                  call("get_schedule", person_id="P05", day="2026-04-14"),
                  call("remove_attendee", actor_id="P05", event_id="EV-103", person_id="P01")],
        verify=lambda o: [o.diff.deleted("attendee", "EV-103|P01"), o.diff.only("attendee")],
        split="test",
    ),
    Task(
        id="who-is-out-wednesday",
        kind="answer",
        instruction="How many people are out of office on Wednesday 15 April, and who are they?",
        solution=[call("list_out_of_office", day="2026-04-15")],
        answer="Two people are out on Wednesday 15 April: Lucas Moreau (vacation) and Grace Liu (sales "
               "conference).",
        expect=[Count(value=2), Entities(expected=[person("P04"), person("P05")], among=PERSON_NAMES)],
    ),
    Task(
        id="big-projector-rooms",
        kind="answer",
        instruction="How many meeting rooms seat at least 10 people and have a projector, and which are they?",
        solution=[call("list_rooms", min_capacity=10, equipment=["projector"])],
        answer="Two: Cedar (12 seats) and Echo (20 seats).",
        expect=[Count(value=2, allow=[12, 20, 3, 4]),  # seats and floors may be stated too
                Entities(expected=[["Cedar", "RM-CEDAR"], ["Echo", "RM-ECHO"]], among=ROOM_NAMES)],
    ),
    Task(
        id="hannah-thursday",
        kind="answer",
        instruction="How many meetings does Hannah Schmidt have on Thursday 16 April, and what are they, when, and in "
                    "which rooms?",
        solution=[call("find_person", query="Hannah"),
                  call("get_schedule", person_id="P01", day="2026-04-16")],
        answer="Two: '1:1 Emma / Hannah' from 10:00 to 10:30 in Dune, and 'Roadmap sync' from 15:00 to 16:00 "
               "in Boreal.",
        expect=[Count(value=2),
                Entities(expected=[["1:1 Emma / Hannah", "1:1", "EV-104"], ["Roadmap sync", "Roadmap", "EV-105"]],
                         among="event.title", label="the meetings"),
                TimeAnswer(start="10:00", end="10:30"), TimeAnswer(start="15:00", end="16:00"),
                Entities(expected=[["Dune", "RM-DUNE"], ["Boreal", "RM-BOREAL"]], among=ROOM_NAMES,
                         label="the rooms")],
        difficulty="medium",
    ),
    Task(
        id="earliest-common-slot",
        kind="answer",
        instruction="On Tuesday 14 April, when is the earliest 30-minute slot when Hannah Schmidt, Omar Haddad "
                    "and Ravi Patel are all free and working? Don't book anything.",
        solution=[call("find_person", query="Hannah"),
                  call("find_person", query="Omar"),
                  call("find_person", query="Ravi"),
                  call("find_free_slots", person_ids=["P01", "P02", "P08"], day="2026-04-14", duration_minutes=30)],
        answer="The earliest common slot is 11:00-11:30 on Tuesday 14 April.",
        expect=[TimeAnswer(start="11:00", allow=["11:30"])],
        difficulty="hard",
        split="test",
    ),
]
