"""IT helpdesk state: employees, tickets and their comments, assets, software licenses and access requests."""

from __future__ import annotations

from sqlalchemy import UniqueConstraint
from sqlmodel import Field

from mcpworld.world import Timestamp, world_base

Base = world_base()


class Employee(Base, table=True):
    id: str = Field(primary_key=True)  # e.g. E03
    name: str
    email: str = Field(unique=True)
    department: str
    role: str = "staff"  # staff | agent | manager
    manager_id: str | None = Field(default=None, foreign_key="employee.id")
    on_call: bool = False  # agents only
    active: bool = True  # False once the employee has left


class Asset(Base, table=True):
    id: str = Field(primary_key=True)  # asset tag, e.g. LT-101
    kind: str  # laptop | monitor | phone | headset
    model: str
    serial: str = Field(unique=True)
    status: str = "in_stock"  # in_stock | in_use | repair | retired
    assigned_to: str | None = Field(default=None, foreign_key="employee.id")


class Ticket(Base, table=True):
    id: str = Field(primary_key=True)  # e.g. T-1001
    title: str
    description: str = ""
    category: str  # hardware | software | network | access | other
    priority: str = "P3"  # P1 | P2 | P3 | P4
    status: str = "open"  # open | in_progress | on_hold | closed
    requester_id: str = Field(foreign_key="employee.id")
    assignee_id: str | None = Field(default=None, foreign_key="employee.id")
    asset_id: str | None = Field(default=None, foreign_key="asset.id")
    approved_by: str | None = Field(default=None, foreign_key="employee.id")  # manager who approved a P1
    created_at: Timestamp
    sla_due_at: Timestamp
    closed_at: Timestamp | None = None
    resolution: str | None = None
    reopen_count: int = 0


class TicketComment(Base, table=True):
    __tablename__ = "ticket_comment"
    id: str = Field(primary_key=True)
    ticket_id: str = Field(foreign_key="ticket.id")
    author_id: str = Field(foreign_key="employee.id")
    body: str
    internal: bool = False  # internal notes are hidden from the requester
    created_at: Timestamp


class SoftwareLicense(Base, table=True):
    __tablename__ = "software_license"
    id: str = Field(primary_key=True)  # e.g. LIC-FIGMA
    product: str
    vendor: str
    seats: int = Field(ge=0)


class LicenseSeat(Base, table=True):
    __tablename__ = "license_seat"
    __table_args__ = (UniqueConstraint("license_id", "employee_id"),)
    id: str = Field(primary_key=True)
    license_id: str = Field(foreign_key="software_license.id")
    employee_id: str = Field(foreign_key="employee.id")
    assigned_at: Timestamp


class AccessRequest(Base, table=True):
    __tablename__ = "access_request"
    id: str = Field(primary_key=True)  # e.g. AR-01
    employee_id: str = Field(foreign_key="employee.id")
    system: str
    level: str  # read | write | admin
    justification: str = ""
    status: str = "pending"  # pending | approved | rejected
    created_at: Timestamp
    decided_by: str | None = Field(default=None, foreign_key="employee.id")
    decided_at: Timestamp | None = None
    decision_note: str | None = None
