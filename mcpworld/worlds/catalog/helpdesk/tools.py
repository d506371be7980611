"""IT helpdesk tools. Business rules live here, each with its own message."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from sqlmodel import col, select

from mcpworld.world import Session, ToolError, fetch, new_id, now, tool

from .data import SLA
from .models import (
    AccessRequest,
    Asset,
    Employee,
    LicenseSeat,
    SoftwareLicense,
    Ticket,
    TicketComment,
)

Priority = Literal["P1", "P2", "P3", "P4"]
TicketStatus = Literal["open", "in_progress", "on_hold", "closed"]
Category = Literal["hardware", "software", "network", "access", "other"]
AssetKind = Literal["laptop", "monitor", "phone", "headset"]
AssetStatus = Literal["in_stock", "in_use", "repair", "retired"]
Condition = Literal["good", "damaged"]
Decision = Literal["approve", "reject"]

REOPEN_WINDOW = timedelta(days=14)
MIN_RESOLUTION = 10  # characters
ROLE_NAMES = {"staff": "a staff member", "agent": "an IT agent", "manager": "a manager"}



def _active_employee(db: Session, employee_id: str) -> Employee:
    employee = fetch(db, Employee, employee_id, "employee")
    if not employee.active:
        raise ToolError(f"employee {employee_id} ({employee.name}) has left the company")
    return employee


def _open_ticket(db: Session, ticket_id: str) -> Ticket:
    ticket = fetch(db, Ticket, ticket_id, "ticket")
    if ticket.status == "closed":
        raise ToolError(f"ticket {ticket_id} is closed; reopen it first")
    return ticket


def _ticket_view(db: Session, ticket: Ticket) -> dict:
    breached = ticket.status != "closed" and ticket.sla_due_at < now(db)
    return {**ticket.model_dump(), "sla_breached": breached}


def _check_p1(db: Session, what: str, approved_by: str | None, assignee_id: str | None) -> None:
    """P1 needs a manager's approval, or an on-call agent as assignee."""
    if approved_by is not None:
        approver = fetch(db, Employee, approved_by, "employee")
        if approver.role != "manager" or not approver.active:
            raise ToolError(f"P1 approval must come from an active manager; {approver.name} ({approved_by}) "
                            f"is not one")
        return
    if assignee_id is not None:
        assignee = fetch(db, Employee, assignee_id, "employee")
        if assignee.role == "agent" and assignee.on_call:
            return
    raise ToolError(f"{what} cannot be P1 without a manager's approval (approved_by) or an on-call agent "
                    "assigned")


def _seats_used(db: Session, license_id: str) -> list[LicenseSeat]:
    return list(db.exec(select(LicenseSeat).where(LicenseSeat.license_id == license_id)))


@tool
def find_employee(db: Session, query: str) -> list[Employee]:
    """Find employees whose name or e-mail contains `query` (case-insensitive), with role and department."""
    text = query.strip().lower()
    if not text:
        raise ToolError("give part of a name or e-mail address to search for")
    rows = db.exec(select(Employee).order_by(Employee.id))
    return [e for e in rows if text in e.name.lower() or text in e.email.lower()]


@tool
def get_employee(db: Session, employee_id: str) -> dict:
    """Get an employee's profile with their manager, assigned assets, license seats and access requests."""
    employee = fetch(db, Employee, employee_id, "employee")
    manager = db.get(Employee, employee.manager_id) if employee.manager_id else None
    assets = db.exec(select(Asset).where(Asset.assigned_to == employee_id).order_by(Asset.id))
    seats = db.exec(select(LicenseSeat, SoftwareLicense).join(SoftwareLicense)
                    .where(LicenseSeat.employee_id == employee_id).order_by(LicenseSeat.license_id))
    requests = db.exec(select(AccessRequest).where(AccessRequest.employee_id == employee_id)
                       .order_by(AccessRequest.id))
    return {
        **employee.model_dump(),
        "manager": {"id": manager.id, "name": manager.name} if manager else None,
        "assets": [a.model_dump() for a in assets],
        "licenses": [{"license_id": lic.id, "product": lic.product, "assigned_at": seat.assigned_at}
                     for seat, lic in seats],
        "access_requests": [r.model_dump() for r in requests],
    }


@tool
def list_tickets(db: Session, status: TicketStatus | None = None, assignee_id: str | None = None,
                 requester_id: str | None = None, priority: Priority | None = None) -> list[dict]:
    """List tickets, oldest first, filtered by status, assignee, requester and/or priority.

    Each ticket carries `sla_breached`: true when it is not closed and its SLA due time has passed.
    """
    query = select(Ticket).order_by(Ticket.created_at)
    if status is not None:
        query = query.where(Ticket.status == status)
    if assignee_id is not None:
        query = query.where(Ticket.assignee_id == assignee_id)
    if requester_id is not None:
        query = query.where(Ticket.requester_id == requester_id)
    if priority is not None:
        query = query.where(Ticket.priority == priority)
    return [_ticket_view(db, t) for t in db.exec(query)]


@tool
def get_ticket(db: Session, ticket_id: str) -> dict:
    """Get one ticket with its SLA state and all its comments (internal notes included), oldest first."""
    ticket = fetch(db, Ticket, ticket_id, "ticket")
    comments = db.exec(select(TicketComment).where(TicketComment.ticket_id == ticket_id)
                       .order_by(TicketComment.created_at))
    return {**_ticket_view(db, ticket), "comments": [c.model_dump() for c in comments]}


@tool(writes=True, destructive=False)
def create_ticket(db: Session, requester_id: str, title: str, category: Category, description: str = "",
                  priority: Priority = "P3", asset_id: str | None = None,
                  approved_by: str | None = None) -> dict:
    """Open a new ticket for an employee. The SLA clock starts now (P1 4h, P2 8h, P3 3 days, P4 7 days).

    Refused when the requester has left the company, or for a P1 without `approved_by` naming an active
    manager (a new ticket has no on-call agent yet). `approved_by` is only recorded for P1.
    """
    _active_employee(db, requester_id)
    if not title.strip():
        raise ToolError("a ticket needs a title")
    if asset_id is not None:
        fetch(db, Asset, asset_id, "asset")
    if priority == "P1":
        _check_p1(db, "a new ticket", approved_by, None)
    ticket_id = new_id(db, "T-", 4)
    created = now(db)
    ticket = Ticket(id=ticket_id, title=title.strip(), description=description.strip(), category=category,
                    priority=priority, requester_id=requester_id, asset_id=asset_id,
                    approved_by=approved_by if priority == "P1" else None, created_at=created,
                    sla_due_at=created + SLA[priority])
    db.add(ticket)
    db.flush()
    return _ticket_view(db, ticket)


@tool(writes=True, destructive=False, idempotent=True)
def assign_ticket(db: Session, ticket_id: str, agent_id: str) -> dict:
    """Assign an open ticket to an IT agent; an `open` ticket moves to `in_progress`.

    Refused when the assignee is not an active agent (staff and managers cannot be assigned tickets), when
    the ticket is closed, or when an unapproved P1 would move away from an on-call agent.
    """
    ticket = _open_ticket(db, ticket_id)
    agent = fetch(db, Employee, agent_id, "employee")
    if agent.role != "agent":
        raise ToolError(f"{agent.name} ({agent_id}) is {ROLE_NAMES[agent.role]}, not an IT agent: only agents "
                        "can be assigned tickets")
    if not agent.active:
        raise ToolError(f"{agent.name} ({agent_id}) has left the company")
    if ticket.priority == "P1" and ticket.approved_by is None:
        _check_p1(db, f"ticket {ticket_id}", None, agent_id)
    ticket.assignee_id = agent_id
    if ticket.status == "open":
        ticket.status = "in_progress"
    return _ticket_view(db, ticket)


@tool(writes=True, destructive=False, idempotent=True)
def set_priority(db: Session, ticket_id: str, priority: Priority, approved_by: str | None = None) -> dict:
    """Change a ticket's priority; its SLA due time is recomputed from when the ticket was opened.

    P1 is refused unless `approved_by` names an active manager or the ticket is assigned to an on-call
    agent. Closed tickets cannot be re-prioritised.
    """
    ticket = _open_ticket(db, ticket_id)
    if ticket.priority == priority:
        raise ToolError(f"ticket {ticket_id} is already {priority}")
    if priority == "P1":
        _check_p1(db, f"ticket {ticket_id}", approved_by, ticket.assignee_id)
        ticket.approved_by = approved_by
    else:
        ticket.approved_by = None
    ticket.priority = priority
    ticket.sla_due_at = ticket.created_at + SLA[priority]
    return _ticket_view(db, ticket)


@tool(writes=True, destructive=False)
def add_comment(db: Session, ticket_id: str, author_id: str, body: str, internal: bool = False) -> TicketComment:
    """Add a comment to a ticket. Internal notes (hidden from the requester) may only be written by IT agents."""
    fetch(db, Ticket, ticket_id, "ticket")
    author = _active_employee(db, author_id)
    if not body.strip():
        raise ToolError("a comment needs a body")
    if internal and author.role != "agent":
        raise ToolError(f"{author.name} is not an IT agent: only agents can write internal notes")
    comment = TicketComment(id=new_id(db, "CM-"), ticket_id=ticket_id, author_id=author_id, body=body.strip(),
                            internal=internal, created_at=now(db))
    db.add(comment)
    return comment


@tool(writes=True)
def close_ticket(db: Session, ticket_id: str, resolution: str) -> dict:
    """Close a ticket with a resolution note saying what was done.

    Refused without a resolution note (at least 10 characters), or when the ticket has no assignee.
    """
    ticket = _open_ticket(db, ticket_id)
    if len(resolution.strip()) < MIN_RESOLUTION:
        raise ToolError("closing a ticket requires a resolution note (at least 10 characters) saying what "
                        "was done")
    if ticket.assignee_id is None:
        raise ToolError(f"ticket {ticket_id} has no assignee: assign it to an agent before closing it")
    ticket.status = "closed"
    ticket.closed_at = now(db)
    ticket.resolution = resolution.strip()
    return _ticket_view(db, ticket)


@tool(writes=True)
def reopen_ticket(db: Session, ticket_id: str, reason: str) -> dict:
    """Reopen a closed ticket (back to its agent), logging the reason as a comment from the requester.

    Refused when the ticket is not closed, or was closed more than 14 days ago: open a new ticket then.
    """
    ticket = fetch(db, Ticket, ticket_id, "ticket")
    if ticket.status != "closed" or ticket.closed_at is None:
        raise ToolError(f"ticket {ticket_id} is {ticket.status}, not closed")
    if now(db) - ticket.closed_at > REOPEN_WINDOW:
        raise ToolError(f"ticket {ticket_id} was closed on {ticket.closed_at:%Y-%m-%d}, more than 14 days ago: "
                        "it cannot be reopened; open a new ticket instead")
    if not reason.strip():
        raise ToolError("give a reason for reopening")
    ticket.status = "in_progress" if ticket.assignee_id else "open"
    ticket.closed_at = None
    ticket.resolution = None
    ticket.reopen_count += 1
    db.add(TicketComment(id=new_id(db, "CM-"), ticket_id=ticket_id, author_id=ticket.requester_id,
                         body=f"Reopened: {reason.strip()}", created_at=now(db)))
    return _ticket_view(db, ticket)


@tool
def list_assets(db: Session, kind: AssetKind | None = None, status: AssetStatus | None = None,
                employee_id: str | None = None) -> list[Asset]:
    """List hardware assets, filtered by kind, status (in_stock, in_use, repair, retired) and/or holder."""
    query = select(Asset).order_by(Asset.id)
    if kind is not None:
        query = query.where(Asset.kind == kind)
    if status is not None:
        query = query.where(Asset.status == status)
    if employee_id is not None:
        query = query.where(Asset.assigned_to == employee_id)
    return list(db.exec(query))


@tool(writes=True, destructive=False)
def assign_asset(db: Session, asset_id: str, employee_id: str) -> Asset:
    """Hand an in-stock asset to an employee.

    Refused when the asset is not in stock, the employee has left, or the employee already has a laptop
    (one laptop per employee: return the old one first).
    """
    asset = fetch(db, Asset, asset_id, "asset")
    employee = _active_employee(db, employee_id)
    if asset.status != "in_stock":
        raise ToolError(f"asset {asset_id} is {asset.status}, not in stock")
    if asset.kind == "laptop":
        held = db.exec(select(Asset).where(Asset.assigned_to == employee_id, Asset.kind == "laptop")).first()
        if held is not None:
            raise ToolError(f"{employee.name} already has laptop {held.id}: one laptop per employee, return it "
                            "first")
    asset.status = "in_use"
    asset.assigned_to = employee_id
    return asset


@tool(writes=True)
def return_asset(db: Session, asset_id: str, condition: Condition) -> Asset:
    """Take an asset back from its holder: `good` puts it back in stock, `damaged` sends it to repair."""
    asset = fetch(db, Asset, asset_id, "asset")
    if asset.status != "in_use" or asset.assigned_to is None:
        raise ToolError(f"asset {asset_id} is {asset.status} and not assigned to anyone")
    asset.status = "in_stock" if condition == "good" else "repair"
    asset.assigned_to = None
    return asset


@tool
def list_licenses(db: Session) -> list[dict]:
    """List software licenses with seats total, used and free, and who holds each seat (and whether active)."""
    out = []
    for lic in db.exec(select(SoftwareLicense).order_by(SoftwareLicense.id)):
        seats = db.exec(select(LicenseSeat, Employee).join(Employee, col(LicenseSeat.employee_id) == Employee.id)
                        .where(LicenseSeat.license_id == lic.id).order_by(LicenseSeat.id)).all()
        out.append({**lic.model_dump(), "seats_used": len(seats), "seats_free": lic.seats - len(seats),
                    "holders": [{"employee_id": e.id, "name": e.name, "active": e.active} for _, e in seats]})
    return out


@tool(writes=True, destructive=False)
def assign_license(db: Session, license_id: str, employee_id: str) -> LicenseSeat:
    """Give an employee a seat of a software license.

    Refused when every seat is taken (revoke one first), the employee already holds a seat, or has left.
    """
    lic = fetch(db, SoftwareLicense, license_id, "license")
    employee = _active_employee(db, employee_id)
    used = _seats_used(db, license_id)
    if any(s.employee_id == employee_id for s in used):
        raise ToolError(f"{employee.name} already holds a seat of {lic.product}")
    if len(used) >= lic.seats:
        raise ToolError(f"all {lic.seats} seats of {lic.product} are taken: no free seat to assign")
    seat = LicenseSeat(id=new_id(db, "LS-"), license_id=license_id, employee_id=employee_id, assigned_at=now(db))
    db.add(seat)
    return seat


@tool(writes=True)
def revoke_license(db: Session, license_id: str, employee_id: str) -> dict:
    """Take a license seat back from an employee, freeing it for someone else."""
    lic = fetch(db, SoftwareLicense, license_id, "license")
    fetch(db, Employee, employee_id, "employee")
    seat = db.exec(select(LicenseSeat).where(LicenseSeat.license_id == license_id,
                                             LicenseSeat.employee_id == employee_id)).first()
    if seat is None:
        raise ToolError(f"employee {employee_id} holds no {lic.product} seat")
    db.delete(seat)
    return {"revoked": seat.model_dump(), "seats_free": lic.seats - len(_seats_used(db, license_id))}


@tool(writes=True)
def decide_access_request(db: Session, request_id: str, approver_id: str, decision: Decision,
                          note: str = "") -> AccessRequest:
    """Approve or reject a pending access request on behalf of `approver_id`.

    Only active IT agents and managers may decide, never on their own request. Admin-level access may only
    be approved by the requesting employee's own manager. A rejection needs a note saying why.
    """
    request = fetch(db, AccessRequest, request_id, "access request")
    approver = _active_employee(db, approver_id)
    if request.status != "pending":
        raise ToolError(f"access request {request_id} is already {request.status}")
    if approver.role not in ("agent", "manager"):
        raise ToolError(f"{approver.name} is {ROLE_NAMES[approver.role]}: only IT agents and managers decide "
                        "access requests")
    if approver_id == request.employee_id:
        raise ToolError("nobody can decide their own access request")
    employee = fetch(db, Employee, request.employee_id, "employee")
    if decision == "approve" and request.level == "admin" and approver_id != employee.manager_id:
        manager = db.get(Employee, employee.manager_id) if employee.manager_id else None
        who = f"{manager.name} ({manager.id})" if manager else "their manager"
        raise ToolError(f"admin access for {employee.name} needs approval from their own manager, {who}; "
                        f"{approver.name} cannot approve it")
    if decision == "reject" and not note.strip():
        raise ToolError("a rejection needs a note saying why")
    request.status = "approved" if decision == "approve" else "rejected"
    request.decided_by = approver_id
    request.decided_at = now(db)
    request.decision_note = note.strip() or None
    return request


TOOLS = [find_employee, get_employee, list_tickets, get_ticket, create_ticket, assign_ticket, set_priority,
         add_comment, close_ticket, reopen_ticket, list_assets, assign_asset, return_asset, list_licenses,
         assign_license, revoke_license, decide_access_request]
