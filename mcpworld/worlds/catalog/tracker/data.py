"""Seed data: three projects mid-sprint, with a blocked issue, an overdue milestone and a duplicate."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from mcpworld.world import Session

from .models import (
    Blocker,
    Issue,
    IssueComment,
    IssueLabel,
    Label,
    Membership,
    Milestone,
    Person,
    Project,
)

NOW = datetime(2026, 5, 11, 10, 0, 0)  # Monday 11 May 2026


def _issue(iid: str, title: str, type_: str, priority: str, status: str, assignee: str | None, reporter: str,
           milestone: str | None, age_days: int, labels: list[str] = ()) -> list:
    created = NOW - timedelta(days=age_days)
    updated = created + timedelta(days=age_days // 2)
    issue = Issue(id=iid, project_id=iid.split("-")[0], title=title, type=type_, priority=priority, status=status,
                  assignee_id=assignee, reporter_id=reporter, milestone_id=milestone, created_at=created,
                  updated_at=updated, resolved_at=updated if status == "done" else None)
    return [issue, *(IssueLabel(issue_id=iid, label_id=lb) for lb in labels)]


MILESTONES = [  # id, project, title, due on, status
    ("MS-1", "WEB", "v2.2", date(2026, 4, 21), "closed"),
    ("MS-2", "WEB", "v2.3", date(2026, 5, 18), "open"),
    ("MS-3", "WEB", "v2.4", date(2026, 6, 15), "open"),
    ("MS-4", "API", "2026-Q2", date(2026, 6, 30), "open"),
    ("MS-5", "MOB", "Beta 1", date(2026, 5, 9), "open"),  # overdue
    ("MS-6", "MOB", "Beta 2", date(2026, 6, 5), "open"),
]
ISSUES = [  # id, title, type, priority, status, assignee, reporter, milestone, age in days, label ids
    ("WEB-1", "Checkout button misaligned on Safari", "bug", "high", "in_progress", "U02", "U05", "MS-2",
     6, ["LB-01", "LB-02"]),
    ("WEB-2", "Add Apple Pay", "feature", "high", "open", None, "U01", "MS-2", 20, ["LB-02"]),
    ("WEB-3", "Upgrade payment SDK to v5", "task", "urgent", "review", "U03", "U01", "MS-2", 10,
     ["LB-02"]),
    ("WEB-4", "Enable 3-D Secure", "feature", "high", "review", "U02", "U01", "MS-2", 9, ["LB-02"]),
    ("WEB-5", "Lazy-load product images", "feature", "medium", "done", "U03", "U01", "MS-1", 40,
     ["LB-03"]),
    ("WEB-6", "Fix typo in footer", "chore", "low", "open", None, "U05", None, 3, ["LB-04"]),
    ("WEB-7", "Product page slow on mobile", "bug", "high", "open", "U03", "U02", "MS-3", 5, ["LB-03"]),
    ("WEB-8", "Checkout button broken in Safari", "bug", "medium", "open", None, "U05", None, 2),
    ("WEB-9", "Update cart page copy", "chore", "low", "done", "U02", "U01", "MS-2", 8),
    ("API-1", "Rotate signing keys", "task", "urgent", "in_progress", "U06", "U04", "MS-4", 7, ["LB-05"]),
    ("API-2", "Document pagination", "task", "low", "open", None, "U04", "MS-4", 15, ["LB-06"]),
    ("API-3", "Rate limiter returns 500 instead of 429", "bug", "high", "review", "U02", "U06", "MS-4",
     4),
    ("API-4", "Remove v1 endpoints", "feature", "medium", "open", "U04", "U04", None, 30, ["LB-07"]),
    ("MOB-1", "Crash on launch on Android 15", "bug", "urgent", "in_progress", "U03", "U07", "MS-5", 6,
     ["LB-08"]),
    ("MOB-2", "Dark mode", "feature", "medium", "done", "U07", "U07", "MS-5", 25),
    ("MOB-3", "Push notification opt-in", "feature", "medium", "review", "U03", "U07", "MS-5", 12,
     ["LB-09"]),
    ("MOB-4", "Update app store screenshots", "task", "low", "open", None, "U07", "MS-6", 2),
]


def seed(db: Session) -> None:
    db.add_all([
        Person(id="U01", name="Alice Chen", email="alice@devco.example"),
        Person(id="U02", name="Bruno Costa", email="bruno@devco.example"),
        Person(id="U03", name="Carmen Diaz", email="carmen@devco.example"),
        Person(id="U04", name="Dev Malhotra", email="dev@devco.example"),
        Person(id="U05", name="Erin O'Neill", email="erin@devco.example"),
        Person(id="U06", name="Felix Braun", email="felix@devco.example"),
        Person(id="U07", name="Gita Sharma", email="gita@devco.example"),
    ])
    db.flush()  # parents first: foreign keys are enforced row by row
    db.add_all([
        Project(id="WEB", name="Web storefront", description="The customer-facing shop.", next_number=10),
        Project(id="API", name="Public API", description="REST API for partners.", next_number=5),
        Project(id="MOB", name="Mobile app", description="iOS and Android apps.", next_number=5),
    ])
    db.flush()
    db.add_all([
        Membership(project_id="WEB", person_id="U01", role="maintainer"),
        Membership(project_id="WEB", person_id="U02", role="developer"),
        Membership(project_id="WEB", person_id="U03", role="developer"),
        Membership(project_id="WEB", person_id="U05", role="viewer"),
        Membership(project_id="API", person_id="U04", role="maintainer"),
        Membership(project_id="API", person_id="U02", role="developer"),
        Membership(project_id="API", person_id="U06", role="developer"),
        Membership(project_id="API", person_id="U01", role="viewer"),
        Membership(project_id="MOB", person_id="U07", role="maintainer"),
        Membership(project_id="MOB", person_id="U03", role="developer"),
        Membership(project_id="MOB", person_id="U06", role="viewer"),
    ])
    db.flush()
    db.add_all([Milestone(id=mid, project_id=pid, title=title, due_on=due, status=status,
                          closed_at=NOW - timedelta(days=19) if status == "closed" else None)
                for mid, pid, title, due, status in MILESTONES])
    db.flush()
    db.add_all([
        Label(id="LB-01", project_id="WEB", name="frontend", color="#1f77b4"),
        Label(id="LB-02", project_id="WEB", name="checkout", color="#ff7f0e"),
        Label(id="LB-03", project_id="WEB", name="performance", color="#d62728"),
        Label(id="LB-04", project_id="WEB", name="good-first-issue", color="#2ca02c"),
        Label(id="LB-05", project_id="API", name="auth", color="#9467bd"),
        Label(id="LB-06", project_id="API", name="docs", color="#8c564b"),
        Label(id="LB-07", project_id="API", name="breaking-change", color="#e377c2"),
        Label(id="LB-08", project_id="MOB", name="android", color="#7f7f7f"),
        Label(id="LB-09", project_id="MOB", name="ios", color="#bcbd22"),
    ])
    db.flush()
    for spec in ISSUES:
        rows = _issue(*spec)
        db.add(rows[0])
        db.flush()
        db.add_all(rows[1:])
    db.flush()
    db.add_all([
        Blocker(issue_id="WEB-4", blocked_by_id="WEB-3", created_at=NOW - timedelta(days=9)),
        IssueComment(id="IC-01", issue_id="WEB-3", author_id="U03", body="PR is up, waiting for review.",
                     created_at=NOW - timedelta(days=2)),
        IssueComment(id="IC-02", issue_id="WEB-4", author_id="U02", body="Needs the v5 SDK from WEB-3.",
                     created_at=NOW - timedelta(days=5)),
        IssueComment(id="IC-03", issue_id="MOB-1", author_id="U07", body="Top crash in the beta; please prioritise.",
                     created_at=NOW - timedelta(days=3)),
        IssueComment(id="IC-04", issue_id="API-3", author_id="U06", body="Repro: 200 requests in one second.",
                     created_at=NOW - timedelta(days=4)),
    ])
