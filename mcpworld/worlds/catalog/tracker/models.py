"""Issue tracker state: people, projects and their members, issues with labels, comments, blockers, milestones."""

from __future__ import annotations

from datetime import date

from sqlalchemy import UniqueConstraint
from sqlmodel import Field

from mcpworld.world import Timestamp, world_base

Base = world_base()


class Person(Base, table=True):
    id: str = Field(primary_key=True)  # e.g. U01
    name: str
    email: str = Field(unique=True)


class Project(Base, table=True):
    id: str = Field(primary_key=True)  # the issue key prefix, e.g. WEB
    name: str
    description: str = ""
    next_number: int = 1  # the number the next issue gets (WEB-10...)


class Membership(Base, table=True):
    project_id: str = Field(foreign_key="project.id", primary_key=True)
    person_id: str = Field(foreign_key="person.id", primary_key=True)
    role: str  # viewer | developer | maintainer


class Milestone(Base, table=True):
    id: str = Field(primary_key=True)  # e.g. MS-2
    project_id: str = Field(foreign_key="project.id")
    title: str
    due_on: date
    status: str = "open"  # open | closed
    closed_at: Timestamp | None = None


class Label(Base, table=True):
    __table_args__ = (UniqueConstraint("project_id", "name"),)
    id: str = Field(primary_key=True)  # e.g. LB-01
    project_id: str = Field(foreign_key="project.id")
    name: str
    color: str = "#888888"


class Issue(Base, table=True):
    id: str = Field(primary_key=True)  # project key and number, e.g. WEB-4
    project_id: str = Field(foreign_key="project.id")
    title: str
    description: str = ""
    type: str  # bug | feature | task | chore
    status: str = "open"  # open | in_progress | review | done
    priority: str = "medium"  # low | medium | high | urgent
    assignee_id: str | None = Field(default=None, foreign_key="person.id")
    reporter_id: str = Field(foreign_key="person.id")
    milestone_id: str | None = Field(default=None, foreign_key="milestone.id")
    created_at: Timestamp
    updated_at: Timestamp
    resolved_at: Timestamp | None = None  # when it last moved to done


class IssueLabel(Base, table=True):
    __tablename__ = "issue_label"
    issue_id: str = Field(foreign_key="issue.id", primary_key=True)
    label_id: str = Field(foreign_key="label.id", primary_key=True)


class IssueComment(Base, table=True):
    __tablename__ = "issue_comment"
    id: str = Field(primary_key=True)
    issue_id: str = Field(foreign_key="issue.id")
    author_id: str = Field(foreign_key="person.id")
    body: str
    created_at: Timestamp


class Blocker(Base, table=True):
    """`issue_id` cannot be done until `blocked_by_id` is done."""

    issue_id: str = Field(foreign_key="issue.id", primary_key=True)
    blocked_by_id: str = Field(foreign_key="issue.id", primary_key=True)
    created_at: Timestamp
