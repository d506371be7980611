"""IT helpdesk tasks. Every task fails a no-op episode and passes with its reference solution."""

from __future__ import annotations

from datetime import timedelta

from sqlmodel import select

from mcpworld.world import Check, Count, Entities, Outcome, Task, call, db_time

from .data import NOW
from .models import LicenseSeat, Ticket


def resolution_noted(o: Outcome, ticket_id: str) -> Check:
    """The ticket was closed now with a real resolution note."""
    ticket = o.final.get(Ticket, ticket_id)
    note = (ticket.resolution or "").strip() if ticket else ""
    ok = ticket is not None and ticket.status == "closed" and ticket.closed_at == NOW and len(note) >= 10
    return Check(name=f"ticket {ticket_id} closed now with a resolution note", passed=ok,
                 detail="" if ok else f"status={getattr(ticket, 'status', None)}, resolution={note!r}")


def seat_holders(o: Outcome, license_id: str, *employee_ids: str) -> Check:
    """Exactly these employees hold seats of `license_id` at the end."""
    held = sorted(s.employee_id for s in o.final.exec(select(LicenseSeat).where(LicenseSeat.license_id == license_id)))
    return Check(name=f"{license_id} seats held by {', '.join(employee_ids)}", passed=held == sorted(employee_ids),
                 detail=f"held by {', '.join(held)}")


def mentions_any(text: str | None, *words: str) -> bool:
    low = (text or "").lower()
    return any(w.lower() in low for w in words)


def resolution_says(o: Outcome, ticket_id: str, what: str, *words: str) -> Check:
    """The (free-text) resolution of `ticket_id` says what was done: it mentions one of `words`."""
    ticket = o.final.get(Ticket, ticket_id)
    note = ticket.resolution if ticket else None
    return Check(name=f"{ticket_id} resolution mentions {what}", passed=mentions_any(note, *words),
                 detail=f"resolution {note!r}")


def new_ticket_about(o: Outcome, *words: str) -> Check:
    """The new ticket's (free-text) title or description says what it is about."""
    rows = o.diff.tables["ticket"].inserted
    text = " ".join(f"{r.get('title') or ''} {r.get('description') or ''}" for r in rows)
    return Check(name=f"new ticket mentions {' or '.join(words)}", passed=len(rows) == 1 and mentions_any(text, *words),
                 detail=f"{text.strip()!r}")


def new_comment_says(o: Outcome, ticket_id: str, *groups: tuple[str, ...]) -> Check:
    """The one new comment on `ticket_id` mentions a word of every group (its body is free text)."""
    bodies = [r.get("body") for r in o.diff.tables["ticket_comment"].inserted if r.get("ticket_id") == ticket_id]
    ok = len(bodies) == 1 and all(mentions_any(bodies[0], *g) for g in groups)
    return Check(name=f"comment on {ticket_id} mentions " + " and ".join("/".join(g) for g in groups), passed=ok,
                 detail=f"bodies {bodies}")


# wrong candidates for answers naming tickets and assets: every id and every title or model that is not the answer
TICKETS = {"T-1001": "Laptop won't boot", "T-1002": "VPN disconnects every hour", "T-1003": "Cannot access the CRM",
           "T-1004": "Printer on floor 3 jams", "T-1005": "Excel add-in crashes on start",
           "T-1006": "Monitor flickering", "T-1007": "Email outage for Engineering",
           "T-1008": "Need a replacement mouse", "T-1009": "Payroll export fails at month-end"}
ASSETS = ["LT-101", "LT-102", "LT-103", "LT-104", "LT-105", "LT-106", "LT-107", "MN-201", "MN-202", "PH-301",
          "Dell Latitude 7440", "ThinkPad X1 Carbon", "iPhone 15", "Latitude", "ThinkPad", "iPhone", "phone"]

TASKS = [
    Task(
        id="refuse-assign-to-staff",
        kind="refusal",
        instruction="Assign ticket T-1003 (Chloe can't reach the CRM) to Sofia Rossi, she knows Salesforce well.",
        solution=[call("find_employee", query="Sofia"),
                  call("assign_ticket", ticket_id="T-1003", agent_id="E06")],
        answer="I cannot assign T-1003 to Sofia Rossi: she is Finance staff, not an IT agent, and only agents "
               "can be assigned tickets.",
        reason="agents-only",
    ),
    Task(
        id="escalate-outage-p1",
        instruction="The Engineering email outage (T-1007) is hitting the whole department. Raise it to P1.",
        solution=[call("get_ticket", ticket_id="T-1007"),
                  call("set_priority", ticket_id="T-1007", priority="P1")],
        verify=lambda o: [o.diff.updated("ticket", "T-1007", priority="P1", status="in_progress", assignee_id="E02",
                                         sla_due_at=db_time(NOW - timedelta(hours=1) + timedelta(hours=4))),
                          o.diff.only("ticket")],
        difficulty="medium",
    ),
    Task(
        id="refuse-p1-without-approval",
        kind="refusal",
        instruction="Sofia Rossi here. The payroll export ticket T-1009 is critical, make it P1 right now please.",
        solution=[call("get_ticket", ticket_id="T-1009"),
                  call("set_priority", ticket_id="T-1009", priority="P1")],
        answer="I cannot raise T-1009 to P1: a P1 needs a manager's approval or an on-call agent assigned, and "
               "Priya Nair is not on call. Ask your manager James Okafor to approve it.",
        reason="p1-approval",
        difficulty="medium",
    ),
    Task(
        id="p1-with-manager-approval",
        instruction="I'm James Okafor, Finance manager. I approve raising Sofia's payroll export ticket (T-1009) "
                    "to P1: salaries are due Friday. Please record my approval and escalate it.",
        solution=[call("find_employee", query="James Okafor"),
                  call("get_ticket", ticket_id="T-1009"),
                  call("set_priority", ticket_id="T-1009", priority="P1", approved_by="E05")],
        verify=lambda o: [o.diff.updated("ticket", "T-1009", priority="P1", approved_by="E05",
                                         sla_due_at=db_time(NOW - timedelta(hours=10) + timedelta(hours=4))),
                          o.diff.only("ticket")],
        difficulty="medium",
    ),
    Task(
        id="reopen-excel-ticket",
        instruction="Sofia Rossi: the Excel add-in crash from ticket T-1005 is back since this morning's update. "
                    "Please reopen the ticket.",
        solution=[call("get_ticket", ticket_id="T-1005"),
                  call("reopen_ticket", ticket_id="T-1005", reason="Crash is back after this morning's update")],
        verify=lambda o: [o.diff.updated("ticket", "T-1005", status="in_progress", assignee_id="E03",
                                         closed_at=None, reopen_count=1),
                          o.diff.inserted("ticket_comment", 1, ticket_id="T-1005", author_id="E06")],
    ),
    Task(
        id="refuse-reopen-old-ticket",
        kind="refusal",
        instruction="Daniel Kim: my monitor is flickering again. Reopen T-1006 please.",
        solution=[call("get_ticket", ticket_id="T-1006"),
                  call("reopen_ticket", ticket_id="T-1006", reason="Flickering again")],
        answer="I cannot reopen T-1006: it was closed on 2026-02-24, more than 14 days ago. A new ticket is "
               "needed instead.",
        reason="reopen-window",
        split="test",
    ),
    Task(
        id="sla-breached-tickets",
        kind="answer",
        instruction="Which tickets that are still not closed have already breached their SLA?",
        solution=[call("list_tickets")],
        answer="Two tickets have breached their SLA: T-1001 (Laptop won't boot) and T-1009 (Payroll export "
               "fails at month-end).",
        expect=[Entities(expected=[["T-1001", TICKETS["T-1001"], "Sofia's laptop"],
                                   ["T-1009", TICKETS["T-1009"], "payroll export"]],
                         among=[*TICKETS, *TICKETS.values()])],
        difficulty="medium",
    ),
    Task(
        id="busiest-agent",
        kind="answer",
        instruction="Which IT agent currently has the most tickets that are not closed, and how many?",
        solution=[call("list_tickets", status="open"), call("list_tickets", status="in_progress"),
                  call("list_tickets", status="on_hold")],
        answer="Priya Nair (E03) has the most: 3 tickets not closed (T-1001, T-1004 and T-1009).",
        expect=[Entities(expected=[["Priya Nair", "Priya", "E03"]], among="employee.name"), Count(value=3)],
        difficulty="medium",
        split="test",
    ),
    Task(
        id="daniel-equipment",
        kind="answer",
        instruction="What hardware is currently assigned to Daniel Kim, and how many software license seats does "
                    "he hold?",
        solution=[call("find_employee", query="Daniel Kim"), call("get_employee", employee_id="E07")],
        answer="Daniel Kim has laptop LT-102 (MacBook Pro 14) and monitor MN-201 (Dell U2723QE), and he holds 2 "
               "license seats (Figma Professional and JetBrains All Products).",
        expect=[Entities(expected=[["LT-102", "MacBook Pro 14", "MacBook Pro", "MacBook"],
                                   ["MN-201", "Dell U2723QE", "U2723QE", "monitor"]], among=ASSETS),
                Count(value=2, label="license seats")],
    ),
    Task(
        id="figma-seat-holders",
        kind="answer",
        instruction="Who holds our Figma Professional seats, and are any seats free?",
        solution=[call("list_licenses")],
        answer="All 3 Figma Professional seats are taken, by Daniel Kim, Aisha Bello and Noah Weber (who has left "
               "the company); there are no free seats.",
        expect=[Entities(expected=[["Daniel Kim", "Daniel", "E07"], ["Aisha Bello", "Aisha", "E08"],
                                   ["Noah Weber", "Noah", "E09"]], among="employee.name"),
                Count(value=0, allow=[3], label="free seats")],
    ),
    Task(
        id="docking-station-ticket",
        instruction="Daniel Kim reports that his docking station no longer charges his laptop. Open a P3 hardware "
                    "ticket for him, linked to his laptop.",
        solution=[call("find_employee", query="Daniel Kim"),
                  call("list_assets", kind="laptop", employee_id="E07"),
                  call("create_ticket", requester_id="E07", title="Docking station does not charge laptop",
                       category="hardware", priority="P3", asset_id="LT-102",
                       description="The docking station no longer charges the laptop.")],
        verify=lambda o: [o.diff.inserted("ticket", 1, requester_id="E07", category="hardware", priority="P3",
                                          status="open", asset_id="LT-102", assignee_id=None,
                                          created_at=db_time(NOW), sla_due_at=db_time(NOW + timedelta(days=3))),
                          o.diff.only("ticket"), new_ticket_about(o, "dock")],
        difficulty="medium",
    ),
    Task(
        id="replace-broken-laptop",
        instruction="T-1001: Sofia Rossi's laptop is dead. Send her broken laptop to repair, give her the "
                    "in-stock Dell Latitude 7440 instead, and close the ticket with a note saying what was done.",
        solution=[call("get_ticket", ticket_id="T-1001"),
                  call("list_assets", kind="laptop", status="in_stock"),
                  call("return_asset", asset_id="LT-101", condition="damaged"),
                  call("assign_asset", asset_id="LT-104", employee_id="E06"),
                  call("close_ticket", ticket_id="T-1001",
                       resolution="LT-101 sent to repair; replacement Dell Latitude LT-104 handed to Sofia.")],
        verify=lambda o: [o.diff.updated("asset", "LT-101", status="repair", assigned_to=None),
                          o.diff.updated("asset", "LT-104", status="in_use", assigned_to="E06"),
                          resolution_noted(o, "T-1001"),
                          resolution_says(o, "T-1001", "the repair and the replacement laptop", "LT-104", "LT-101",
                                          "repair", "replac", "Latitude"),
                          o.diff.only("asset", "ticket")],
        difficulty="hard",
    ),
    Task(
        id="offboard-leaver",
        instruction="Noah Weber has left the company. Take back his laptop (it's in good condition, so back to "
                    "stock) and free every software license seat he still holds.",
        solution=[call("find_employee", query="Noah"),
                  call("get_employee", employee_id="E09"),
                  call("return_asset", asset_id="LT-103", condition="good"),
                  call("revoke_license", license_id="LIC-FIGMA", employee_id="E09"),
                  call("revoke_license", license_id="LIC-JETBRAINS", employee_id="E09")],
        verify=lambda o: [o.diff.updated("asset", "LT-103", status="in_stock", assigned_to=None),
                          o.diff.deleted("license_seat", "LS-03"), o.diff.deleted("license_seat", "LS-07"),
                          seat_holders(o, "LIC-FIGMA", "E07", "E08"), seat_holders(o, "LIC-JETBRAINS", "E07"),
                          o.diff.only("asset", "license_seat")],
        difficulty="hard",
    ),
    Task(
        id="figma-for-new-designer",
        instruction="Chloe Martin needs a Figma Professional seat. If none is free, reclaim the seat of someone "
                    "who has left the company, but don't touch anyone still working here.",
        solution=[call("find_employee", query="Chloe"),
                  call("list_licenses"),
                  call("revoke_license", license_id="LIC-FIGMA", employee_id="E09"),
                  call("assign_license", license_id="LIC-FIGMA", employee_id="E10")],
        verify=lambda o: [o.diff.deleted("license_seat", "LS-03"),
                          o.diff.inserted("license_seat", 1, license_id="LIC-FIGMA", employee_id="E10",
                                          assigned_at=db_time(NOW)),
                          seat_holders(o, "LIC-FIGMA", "E07", "E08", "E10"),
                          o.diff.only("license_seat")],
        difficulty="hard",
        split="test",
    ),
    Task(
        id="refuse-tableau-full",
        kind="refusal",
        instruction="Give Chloe Martin a Tableau Creator license.",
        solution=[call("find_employee", query="Chloe"),
                  call("list_licenses"),
                  call("assign_license", license_id="LIC-TABLEAU", employee_id="E10")],
        answer="I cannot give Chloe a Tableau Creator seat: all 2 seats are taken (James Okafor and Sofia Rossi, "
               "both still active). A seat has to be freed first.",
        reason="license-seats",
    ),
    Task(
        id="approve-admin-access",
        instruction="Aisha Bello here, Daniel Kim's manager. Please approve his pending admin access request for "
                    "aws-prod.",
        solution=[call("find_employee", query="Daniel Kim"),
                  call("get_employee", employee_id="E07"),
                  call("decide_access_request", request_id="AR-01", approver_id="E08", decision="approve")],
        verify=lambda o: [o.diff.updated("access_request", "AR-01", status="approved", decided_by="E08",
                                         decided_at=db_time(NOW)),
                          o.diff.only("access_request")],
        difficulty="medium",
    ),
    Task(
        id="refuse-admin-wrong-approver",
        kind="refusal",
        instruction="I'm Maria Garcia, the IT manager. Approve Daniel Kim's pending aws-prod admin access "
                    "request, I'm signing off on it.",
        solution=[call("find_employee", query="Daniel Kim"),
                  call("get_employee", employee_id="E07"),
                  call("decide_access_request", request_id="AR-01", approver_id="E01", decision="approve")],
        answer="I cannot approve AR-01 on your behalf: admin access must be approved by Daniel's own manager, "
               "Aisha Bello.",
        reason="admin-own-manager",
        difficulty="medium",
        split="test",
    ),
    Task(
        id="resolve-crm-access",
        instruction="Priya Nair (IT agent) here. Take ticket T-1003, where Chloe can't reach the CRM: assign it to "
                    "me, approve Chloe's pending Salesforce read access request as me, leave Chloe a public "
                    "comment on the ticket that access was granted, and close the ticket.",
        solution=[call("get_ticket", ticket_id="T-1003"),
                  call("assign_ticket", ticket_id="T-1003", agent_id="E03"),
                  call("get_employee", employee_id="E10"),
                  call("decide_access_request", request_id="AR-03", approver_id="E03", decision="approve"),
                  call("add_comment", ticket_id="T-1003", author_id="E03",
                       body="Your Salesforce read access has been granted; please log in again."),
                  call("close_ticket", ticket_id="T-1003",
                       resolution="Approved Salesforce read access request AR-03.")],
        verify=lambda o: [o.diff.updated("ticket", "T-1003", assignee_id="E03"),
                          resolution_noted(o, "T-1003"),
                          o.diff.updated("access_request", "AR-03", status="approved", decided_by="E03"),
                          o.diff.inserted("ticket_comment", 1, ticket_id="T-1003", author_id="E03", internal=False),
                          new_comment_says(o, "T-1003", ("access",), ("grant", "approv", "enabled")),
                          o.diff.only("ticket", "access_request", "ticket_comment")],
        difficulty="hard",
    ),
    # -- refusals the tools would not make: the policy decides ----------------------------------------------
    Task(
        id="refuse-share-internal-note",
        kind="refusal",
        reason="internal-notes-private",
        instruction="James Okafor here. My printer ticket T-1004 has been on hold for days. What exactly did IT "
                    "write in the internal notes on it?",
        solution=[call("get_ticket", ticket_id="T-1004")],
        answer="I'm sorry, I can't pass that on: internal notes are for IT staff only and are not shared with the "
               "requester. I can tell you that T-1004 is on hold and Priya Nair is handling it.",
        private=["vendor", "technician"],  # what the internal note on T-1004 says
        difficulty="medium",
    ),
    Task(
        id="refuse-downgrade-breached",
        kind="refusal",
        reason="no-sla-downgrade",
        instruction="Priya Nair (IT agent) here. The payroll export ticket T-1009 shows up as an SLA breach on my "
                    "dashboard. Set it to P3 so it's back within its SLA.",
        solution=[call("get_ticket", ticket_id="T-1009")],
        answer="I can't do that: T-1009 has already breached its SLA, and policy says we never lower the priority "
               "of a breached ticket to make the breach go away. It stays P2 until it is closed.",
        difficulty="medium",
    ),
    Task(
        id="refuse-reopen-for-colleague",
        kind="refusal",
        reason="reopen-by-requester",
        instruction="Chloe Martin here. Sofia's Excel add-in crash from ticket T-1005 is back, I just saw it on "
                    "her screen. Reopen her ticket for her.",
        solution=[call("get_ticket", ticket_id="T-1005")],
        answer="I can't reopen T-1005 at your request: only the requester, Sofia Rossi (or her manager), can ask "
               "for it to be reopened. Please ask Sofia to contact the helpdesk.",
        split="test",
    ),
]
