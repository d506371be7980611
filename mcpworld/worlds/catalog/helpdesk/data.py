"""Seed data: a small company's IT desk with rules worth testing (full licenses, old tickets, a leaver...)."""

from __future__ import annotations

from datetime import datetime, timedelta

from mcpworld.world import Session

from .models import (
    AccessRequest,
    Asset,
    Employee,
    LicenseSeat,
    SoftwareLicense,
    Ticket,
    TicketComment,
)

NOW = datetime(2026, 3, 16, 10, 0, 0)  # a Monday morning

SLA = {"P1": timedelta(hours=4), "P2": timedelta(hours=8), "P3": timedelta(days=3), "P4": timedelta(days=7)}


def _ticket(tid: str, title: str, category: str, priority: str, status: str, requester: str,
            assignee: str | None, age: timedelta, **extra) -> Ticket:
    created = NOW - age
    return Ticket(id=tid, title=title, category=category, priority=priority, status=status,
                  requester_id=requester, assignee_id=assignee, created_at=created,
                  sla_due_at=created + SLA[priority], **extra)


def seed(db: Session) -> None:
    db.add_all([
        Employee(id="E01", name="Maria Garcia", email="maria.garcia@corp.example", department="IT", role="manager"),
        Employee(id="E02", name="Tom Becker", email="tom.becker@corp.example", department="IT", role="agent",
                 manager_id="E01", on_call=True),
        Employee(id="E03", name="Priya Nair", email="priya.nair@corp.example", department="IT", role="agent",
                 manager_id="E01"),
        Employee(id="E04", name="Lena Fischer", email="lena.fischer@corp.example", department="IT", role="agent",
                 manager_id="E01"),
        Employee(id="E05", name="James Okafor", email="james.okafor@corp.example", department="Finance",
                 role="manager"),
        Employee(id="E06", name="Sofia Rossi", email="sofia.rossi@corp.example", department="Finance",
                 manager_id="E05"),
        Employee(id="E08", name="Aisha Bello", email="aisha.bello@corp.example", department="Engineering",
                 role="manager"),
        Employee(id="E07", name="Daniel Kim", email="daniel.kim@corp.example", department="Engineering",
                 manager_id="E08"),
        # left the company last week: still holds a laptop and two license seats
        Employee(id="E09", name="Noah Weber", email="noah.weber@corp.example", department="Engineering",
                 manager_id="E08", active=False),
        Employee(id="E10", name="Chloe Martin", email="chloe.martin@corp.example", department="Sales",
                 manager_id="E05"),
    ])
    db.flush()  # parents first: foreign keys are enforced row by row
    db.add_all([
        Asset(id="LT-101", kind="laptop", model="Dell Latitude 7440", serial="DL7440-0001", status="in_use",
              assigned_to="E06"),
        Asset(id="LT-102", kind="laptop", model="MacBook Pro 14", serial="MBP14-0002", status="in_use",
              assigned_to="E07"),
        Asset(id="LT-103", kind="laptop", model="MacBook Pro 14", serial="MBP14-0003", status="in_use",
              assigned_to="E09"),
        Asset(id="LT-104", kind="laptop", model="Dell Latitude 7440", serial="DL7440-0004"),
        Asset(id="LT-105", kind="laptop", model="ThinkPad X1 Carbon", serial="TPX1-0005"),
        Asset(id="LT-106", kind="laptop", model="ThinkPad X1 Carbon", serial="TPX1-0006", status="repair"),
        Asset(id="LT-107", kind="laptop", model="Dell Latitude 7440", serial="DL7440-0007", status="in_use",
              assigned_to="E10"),
        Asset(id="MN-201", kind="monitor", model="Dell U2723QE", serial="U2723-0201", status="in_use",
              assigned_to="E07"),
        Asset(id="MN-202", kind="monitor", model="Dell U2723QE", serial="U2723-0202"),
        Asset(id="PH-301", kind="phone", model="iPhone 15", serial="IP15-0301", status="in_use", assigned_to="E05"),
    ])
    db.flush()
    db.add_all([
        # T-1001 and T-1009 have breached their SLA; T-1005 was closed 5 days ago, T-1006 20 days ago
        _ticket("T-1001", "Laptop won't boot", "hardware", "P2", "in_progress", "E06", "E03", timedelta(days=1),
                asset_id="LT-101", description="Black screen after the BIOS logo since this morning."),
        _ticket("T-1002", "VPN disconnects every hour", "network", "P3", "open", "E07", None, timedelta(hours=2)),
        _ticket("T-1003", "Cannot access the CRM", "access", "P2", "open", "E10", None, timedelta(minutes=30),
                description="Salesforce says I have no licence / no access."),
        _ticket("T-1004", "Printer on floor 3 jams", "hardware", "P4", "on_hold", "E05", "E03", timedelta(days=5)),
        _ticket("T-1005", "Excel add-in crashes on start", "software", "P3", "closed", "E06", "E03",
                timedelta(days=12), closed_at=NOW - timedelta(days=5),
                resolution="Reinstalled the reporting add-in and cleared the Office cache."),
        _ticket("T-1006", "Monitor flickering", "hardware", "P3", "closed", "E07", "E02", timedelta(days=25),
                asset_id="MN-201", closed_at=NOW - timedelta(days=20),
                resolution="Replaced the DisplayPort cable."),
        _ticket("T-1007", "Email outage for Engineering", "network", "P2", "in_progress", "E08", "E02",
                timedelta(hours=1), description="Nobody in Engineering can send or receive mail."),
        _ticket("T-1008", "Need a replacement mouse", "hardware", "P4", "in_progress", "E10", "E04",
                timedelta(days=3)),
        _ticket("T-1009", "Payroll export fails at month-end", "software", "P2", "in_progress", "E06", "E03",
                timedelta(hours=10), description="The payroll export job errors out; salaries are due Friday."),
    ])
    db.flush()
    db.add_all([
        TicketComment(id="CM-01", ticket_id="T-1001", author_id="E03", body="Collecting the laptop for diagnosis.",
                      created_at=NOW - timedelta(hours=20)),
        TicketComment(id="CM-02", ticket_id="T-1004", author_id="E03", body="Waiting for the vendor technician.",
                      internal=True, created_at=NOW - timedelta(days=4)),
        TicketComment(id="CM-03", ticket_id="T-1005", author_id="E06", body="Works again, thanks!",
                      created_at=NOW - timedelta(days=5)),
        TicketComment(id="CM-04", ticket_id="T-1007", author_id="E02", body="Mail gateway certificate expired.",
                      internal=True, created_at=NOW - timedelta(minutes=40)),
    ])
    db.flush()
    db.add_all([
        SoftwareLicense(id="LIC-FIGMA", product="Figma Professional", vendor="Figma", seats=3),
        SoftwareLicense(id="LIC-ACROBAT", product="Adobe Acrobat Pro", vendor="Adobe", seats=5),
        SoftwareLicense(id="LIC-JETBRAINS", product="JetBrains All Products", vendor="JetBrains", seats=4),
        SoftwareLicense(id="LIC-TABLEAU", product="Tableau Creator", vendor="Salesforce", seats=2),
    ])
    db.flush()
    db.add_all([
        LicenseSeat(id="LS-01", license_id="LIC-FIGMA", employee_id="E07", assigned_at=NOW - timedelta(days=200)),
        LicenseSeat(id="LS-02", license_id="LIC-FIGMA", employee_id="E08", assigned_at=NOW - timedelta(days=180)),
        LicenseSeat(id="LS-03", license_id="LIC-FIGMA", employee_id="E09", assigned_at=NOW - timedelta(days=90)),
        LicenseSeat(id="LS-04", license_id="LIC-ACROBAT", employee_id="E05", assigned_at=NOW - timedelta(days=300)),
        LicenseSeat(id="LS-05", license_id="LIC-ACROBAT", employee_id="E06", assigned_at=NOW - timedelta(days=150)),
        LicenseSeat(id="LS-06", license_id="LIC-JETBRAINS", employee_id="E07",
                    assigned_at=NOW - timedelta(days=200)),
        LicenseSeat(id="LS-07", license_id="LIC-JETBRAINS", employee_id="E09",
                    assigned_at=NOW - timedelta(days=90)),
        LicenseSeat(id="LS-08", license_id="LIC-TABLEAU", employee_id="E05", assigned_at=NOW - timedelta(days=60)),
        LicenseSeat(id="LS-09", license_id="LIC-TABLEAU", employee_id="E06", assigned_at=NOW - timedelta(days=60)),
    ])
    db.flush()
    db.add_all([
        AccessRequest(id="AR-01", employee_id="E07", system="aws-prod", level="admin",
                      justification="Joining the production on-call rotation.", created_at=NOW - timedelta(days=1)),
        AccessRequest(id="AR-02", employee_id="E06", system="netsuite", level="write",
                      justification="Posting journal entries for the quarter close.",
                      created_at=NOW - timedelta(days=2)),
        AccessRequest(id="AR-03", employee_id="E10", system="salesforce", level="read",
                      justification="Need to see my accounts in the CRM.", created_at=NOW - timedelta(hours=1)),
        AccessRequest(id="AR-04", employee_id="E06", system="payroll-db", level="admin",
                      justification="Fix payroll data directly.", status="rejected",
                      created_at=NOW - timedelta(days=10), decided_by="E05", decided_at=NOW - timedelta(days=9),
                      decision_note="Use the payroll export instead of direct database access."),
        AccessRequest(id="AR-05", employee_id="E09", system="github", level="write", status="approved",
                      created_at=NOW - timedelta(days=95), decided_by="E03", decided_at=NOW - timedelta(days=94)),
    ])
