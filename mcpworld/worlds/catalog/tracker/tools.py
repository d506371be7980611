"""Issue tracker tools. Business rules live here, each with its own message."""

from __future__ import annotations

from typing import Literal

from sqlmodel import col, select

from mcpworld.world import Session, ToolError, fetch, new_id, now, tool

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

Status = Literal["open", "in_progress", "review", "done"]
IssueType = Literal["bug", "feature", "task", "chore"]
Priority = Literal["low", "medium", "high", "urgent"]
MilestoneStatus = Literal["open", "closed"]

WORKFLOW = {
    "open": ("in_progress",),
    "in_progress": ("review", "open"),
    "review": ("done", "in_progress"),
    "done": ("open",),
}
RANK = {"viewer": 0, "developer": 1, "maintainer": 2}



def _require(db: Session, project_id: str, actor_id: str, minimum: str = "developer", action: str = "") -> Person:
    """The actor, if their role in the project is at least `minimum`."""
    actor = fetch(db, Person, actor_id, "person")
    member = db.get(Membership, (project_id, actor_id))
    if member is None:
        raise ToolError(f"{actor.name} is not a member of project {project_id}")
    if RANK[member.role] < RANK[minimum]:
        if member.role == "viewer":
            raise ToolError(f"{actor.name} is a viewer in {project_id}: viewers cannot modify anything")
        raise ToolError(f"{actor.name} is a {member.role} in {project_id}: only maintainers can {action or 'do that'}")
    return actor


def _assignable(db: Session, project_id: str, person_id: str) -> Person:
    person = fetch(db, Person, person_id, "person")
    member = db.get(Membership, (project_id, person_id))
    if member is None:
        raise ToolError(f"{person.name} is not a member of project {project_id}: only members can be assigned")
    if member.role == "viewer":
        raise ToolError(f"{person.name} is a viewer in {project_id}: viewers cannot be assigned issues")
    return person


def _open_milestone(db: Session, project_id: str, milestone_id: str) -> Milestone:
    milestone = fetch(db, Milestone, milestone_id, "milestone")
    if milestone.project_id != project_id:
        raise ToolError(f"milestone {milestone_id} belongs to project {milestone.project_id}, not {project_id}")
    if milestone.status != "open":
        raise ToolError(f"milestone {milestone.title} ({milestone_id}) is closed")
    return milestone


def _label(db: Session, project_id: str, name: str) -> Label:
    label = db.exec(select(Label).where(Label.project_id == project_id, Label.name == name.strip().lower())).first()
    if label is None:
        known = ", ".join(lb.name for lb in db.exec(select(Label).where(Label.project_id == project_id)))
        raise ToolError(f"project {project_id} has no label {name!r}; its labels: {known}")
    return label


def _labels_of(db: Session, issue_id: str) -> list[str]:
    rows = db.exec(select(Label).join(IssueLabel, col(IssueLabel.label_id) == Label.id)
                   .where(IssueLabel.issue_id == issue_id).order_by(Label.name))
    return [lb.name for lb in rows]


def _open_blockers(db: Session, issue_id: str) -> list[Issue]:
    return list(db.exec(select(Issue).join(Blocker, col(Blocker.blocked_by_id) == Issue.id)
                        .where(Blocker.issue_id == issue_id, Issue.status != "done").order_by(Issue.id)))


def _issue_view(db: Session, issue: Issue) -> dict:
    return {**issue.model_dump(), "labels": _labels_of(db, issue.id)}


def _touch(db: Session, issue: Issue) -> None:
    issue.updated_at = now(db)


def _milestone_view(db: Session, milestone: Milestone) -> dict:
    issues = list(db.exec(select(Issue).where(Issue.milestone_id == milestone.id).order_by(Issue.id)))
    unfinished = [i.id for i in issues if i.status != "done"]
    return {**milestone.model_dump(), "issues": len(issues), "done": len(issues) - len(unfinished),
            "unfinished": unfinished,
            "overdue": milestone.status == "open" and milestone.due_on < now(db).date()}


@tool
def find_person(db: Session, query: str) -> list[Person]:
    """Find people whose name or e-mail contains `query` (case-insensitive)."""
    text = query.strip().lower()
    if not text:
        raise ToolError("give part of a name or e-mail address to search for")
    return [p for p in db.exec(select(Person).order_by(Person.id)) if text in p.name.lower() or text in p.email]


@tool
def list_projects(db: Session, person_id: str | None = None) -> list[dict]:
    """List projects (all, or those `person_id` belongs to, with their role there)."""
    if person_id is not None:
        fetch(db, Person, person_id, "person")
    out = []
    for project in db.exec(select(Project).order_by(Project.id)):
        member = db.get(Membership, (project.id, person_id)) if person_id else None
        if person_id is None or member is not None:
            out.append({**project.model_dump(), "role": member.role if member else None})
    return out


@tool
def get_project(db: Session, project_id: str) -> dict:
    """Get a project with its members (and their roles) and its labels."""
    project = fetch(db, Project, project_id, "project")
    members = db.exec(select(Membership, Person).join(Person, col(Membership.person_id) == Person.id)
                      .where(Membership.project_id == project_id).order_by(Membership.person_id)).all()
    labels = db.exec(select(Label).where(Label.project_id == project_id).order_by(Label.name))
    return {**project.model_dump(),
            "members": [{"person_id": p.id, "name": p.name, "role": m.role} for m, p in members],
            "labels": [lb.name for lb in labels]}


@tool
def list_milestones(db: Session, project_id: str | None = None, status: MilestoneStatus | None = None) -> list[dict]:
    """List milestones with their due date, progress (issues, done, unfinished ids) and whether overdue."""
    query = select(Milestone).order_by(Milestone.project_id, Milestone.due_on)
    if project_id is not None:
        fetch(db, Project, project_id, "project")
        query = query.where(Milestone.project_id == project_id)
    if status is not None:
        query = query.where(Milestone.status == status)
    return [_milestone_view(db, m) for m in db.exec(query)]


@tool
def search_issues(db: Session, project_id: str | None = None, status: Status | None = None,
                  assignee_id: str | None = None, type: IssueType | None = None, priority: Priority | None = None,
                  label: str | None = None, milestone_id: str | None = None, text: str | None = None) -> list[dict]:
    """Search issues across projects (or in one), by status, assignee, type, priority, label name, milestone
    and/or words in the title."""
    query = select(Issue).order_by(Issue.project_id, Issue.created_at)
    filters = {"project_id": project_id, "status": status, "assignee_id": assignee_id, "type": type,
               "priority": priority, "milestone_id": milestone_id}
    for column, value in filters.items():
        if value is not None:
            query = query.where(getattr(Issue, column) == value)
    rows = [_issue_view(db, i) for i in db.exec(query)]
    if label is not None:
        rows = [r for r in rows if label.strip().lower() in r["labels"]]
    if text is not None:
        rows = [r for r in rows if text.strip().lower() in r["title"].lower()]
    return rows


@tool
def get_issue(db: Session, issue_id: str) -> dict:
    """Get an issue with its labels, comments, the issues blocking it (with their status) and those it blocks."""
    issue = fetch(db, Issue, issue_id, "issue")
    comments = db.exec(select(IssueComment).where(IssueComment.issue_id == issue_id)
                       .order_by(IssueComment.created_at))
    blocked_by = db.exec(select(Issue).join(Blocker, col(Blocker.blocked_by_id) == Issue.id)
                         .where(Blocker.issue_id == issue_id).order_by(Issue.id))
    blocks = db.exec(select(Blocker).where(Blocker.blocked_by_id == issue_id).order_by(Blocker.issue_id))
    return {**_issue_view(db, issue), "comments": [c.model_dump() for c in comments],
            "blocked_by": [{"id": i.id, "title": i.title, "status": i.status} for i in blocked_by],
            "blocks": [b.issue_id for b in blocks]}


@tool(writes=True, destructive=False)
def create_issue(db: Session, actor_id: str, project_id: str, title: str, type: IssueType,
                 priority: Priority = "medium", description: str = "", assignee_id: str | None = None,
                 milestone_id: str | None = None, labels: list[str] | None = None) -> dict:
    """File a new issue (status open) reported by `actor_id`; it gets the project's next key, e.g. WEB-10.

    Refused for viewers and non-members, for an assignee who is not a developer or maintainer of the
    project, a milestone that is closed or in another project, or a label the project does not have.
    """
    project = fetch(db, Project, project_id, "project")
    _require(db, project_id, actor_id)
    if not title.strip():
        raise ToolError("an issue needs a title")
    if assignee_id is not None:
        _assignable(db, project_id, assignee_id)
    if milestone_id is not None:
        _open_milestone(db, project_id, milestone_id)
    found = [_label(db, project_id, name) for name in dict.fromkeys(labels or [])]
    issue = Issue(id=f"{project.id}-{project.next_number}", project_id=project_id, title=title.strip(),
                  description=description.strip(), type=type, priority=priority, assignee_id=assignee_id,
                  reporter_id=actor_id, milestone_id=milestone_id, created_at=now(db), updated_at=now(db))
    project.next_number += 1
    db.add(issue)
    db.flush()  # the issue row before its labels (foreign keys)
    db.add_all([IssueLabel(issue_id=issue.id, label_id=lb.id) for lb in found])
    db.flush()
    return _issue_view(db, issue)


@tool(writes=True, destructive=False, idempotent=True)
def update_issue(db: Session, actor_id: str, issue_id: str, title: str | None = None,
                 description: str | None = None, priority: Priority | None = None,
                 type: IssueType | None = None) -> dict:
    """Edit an issue's title, description, priority and/or type. Viewers and non-members are refused."""
    issue = fetch(db, Issue, issue_id, "issue")
    _require(db, issue.project_id, actor_id)
    if title is None and description is None and priority is None and type is None:
        raise ToolError("give at least one field to change")
    if title is not None:
        if not title.strip():
            raise ToolError("an issue needs a title")
        issue.title = title.strip()
    if description is not None:
        issue.description = description.strip()
    if priority is not None:
        issue.priority = priority
    if type is not None:
        issue.type = type
    _touch(db, issue)
    return _issue_view(db, issue)


@tool(writes=True, destructive=False, idempotent=True)
def assign_issue(db: Session, actor_id: str, issue_id: str, assignee_id: str | None) -> dict:
    """Assign an issue to a project member (developer or maintainer), or unassign it with null.

    Refused for viewers and non-members acting, for an assignee who is not a developer or maintainer of the
    project, and for unassigning an issue that is in progress or in review (move it back to open first).
    """
    issue = fetch(db, Issue, issue_id, "issue")
    _require(db, issue.project_id, actor_id)
    if assignee_id is None:
        if issue.status in ("in_progress", "review"):
            raise ToolError(f"issue {issue_id} is {issue.status}: move it back to open before unassigning it")
    else:
        _assignable(db, issue.project_id, assignee_id)
    if issue.assignee_id == assignee_id:
        raise ToolError(f"issue {issue_id} is already assigned that way")
    issue.assignee_id = assignee_id
    _touch(db, issue)
    return _issue_view(db, issue)


@tool(writes=True, destructive=False)
def transition_issue(db: Session, actor_id: str, issue_id: str, status: Status) -> dict:
    """Move an issue along the workflow: open -> in_progress -> review -> done; review may go back to
    in_progress, in_progress back to open, and done may be reopened to open.

    Refused for viewers and non-members, for any other jump (e.g. open or in_progress straight to done),
    for in_progress without an assignee, and for done while an issue blocking it is not done.
    """
    issue = fetch(db, Issue, issue_id, "issue")
    _require(db, issue.project_id, actor_id)
    if status == issue.status:
        raise ToolError(f"issue {issue_id} is already {status}")
    allowed = WORKFLOW[issue.status]
    if status not in allowed:
        raise ToolError(f"issue {issue_id} cannot go from {issue.status} to {status}: the workflow allows "
                        f"{issue.status} -> {' or '.join(allowed)} (open -> in_progress -> review -> done)")
    if status == "in_progress" and issue.assignee_id is None:
        raise ToolError(f"issue {issue_id} has no assignee: assign it before starting work")
    if status == "done":
        blockers = _open_blockers(db, issue_id)
        if blockers:
            names = ", ".join(f"{b.id} ({b.status})" for b in blockers)
            raise ToolError(f"issue {issue_id} cannot be done while it is blocked by unfinished issues: {names}")
        issue.resolved_at = now(db)
    elif issue.status == "done":
        issue.resolved_at = None
    issue.status = status
    _touch(db, issue)
    return _issue_view(db, issue)


@tool(writes=True, idempotent=True)
def label_issue(db: Session, actor_id: str, issue_id: str, add: list[str] | None = None,
                remove: list[str] | None = None) -> dict:
    """Add and/or remove labels (by name, from the project's labels) on an issue. Viewers are refused."""
    issue = fetch(db, Issue, issue_id, "issue")
    _require(db, issue.project_id, actor_id)
    if not add and not remove:
        raise ToolError("give labels to add or remove")
    for name in add or []:
        label = _label(db, issue.project_id, name)
        if db.get(IssueLabel, (issue_id, label.id)) is None:
            db.add(IssueLabel(issue_id=issue_id, label_id=label.id))
    for name in remove or []:
        label = _label(db, issue.project_id, name)
        link = db.get(IssueLabel, (issue_id, label.id))
        if link is None:
            raise ToolError(f"issue {issue_id} has no label {label.name!r}")
        db.delete(link)
    _touch(db, issue)
    db.flush()
    return _issue_view(db, issue)


@tool(writes=True, destructive=False)
def add_comment(db: Session, actor_id: str, issue_id: str, body: str) -> IssueComment:
    """Comment on an issue. Viewers and non-members are refused (viewers are read-only)."""
    issue = fetch(db, Issue, issue_id, "issue")
    _require(db, issue.project_id, actor_id)
    if not body.strip():
        raise ToolError("a comment needs a body")
    comment = IssueComment(id=new_id(db, "IC-"), issue_id=issue_id, author_id=actor_id, body=body.strip(),
                           created_at=now(db))
    db.add(comment)
    _touch(db, issue)
    return comment


@tool(writes=True, destructive=False)
def link_blocker(db: Session, actor_id: str, issue_id: str, blocked_by_id: str) -> dict:
    """Record that `issue_id` cannot be done until `blocked_by_id` is done (both in the same project).

    Refused for viewers and non-members, for an issue blocking itself, a link that exists, or one that would
    make a cycle of blockers.
    """
    issue = fetch(db, Issue, issue_id, "issue")
    blocker = fetch(db, Issue, blocked_by_id, "issue")
    _require(db, issue.project_id, actor_id)
    if blocker.project_id != issue.project_id:
        raise ToolError(f"{blocked_by_id} is in project {blocker.project_id}; blockers must be in the same project")
    if issue_id == blocked_by_id:
        raise ToolError("an issue cannot block itself")
    if db.get(Blocker, (issue_id, blocked_by_id)) is not None:
        raise ToolError(f"{blocked_by_id} already blocks {issue_id}")
    seen, todo = set(), [blocked_by_id]
    while todo:  # walk what blocks the blocker: reaching issue_id would close a cycle
        current = todo.pop()
        if current == issue_id:
            raise ToolError(f"{issue_id} already (indirectly) blocks {blocked_by_id}: that would be a cycle")
        if current not in seen:
            seen.add(current)
            todo += [b.blocked_by_id for b in db.exec(select(Blocker).where(Blocker.issue_id == current))]
    db.add(Blocker(issue_id=issue_id, blocked_by_id=blocked_by_id, created_at=now(db)))
    _touch(db, issue)
    db.flush()
    return get_issue(db, issue_id)


@tool(writes=True, destructive=False, idempotent=True)
def set_milestone(db: Session, actor_id: str, issue_id: str, milestone_id: str | None) -> dict:
    """Put an issue in an open milestone of its project, or take it out of its milestone with null.

    Refused for viewers and non-members, and for closed milestones or milestones of another project.
    """
    issue = fetch(db, Issue, issue_id, "issue")
    _require(db, issue.project_id, actor_id)
    if milestone_id is not None:
        _open_milestone(db, issue.project_id, milestone_id)
    if issue.milestone_id == milestone_id:
        raise ToolError(f"issue {issue_id} is already in that milestone")
    issue.milestone_id = milestone_id
    _touch(db, issue)
    return _issue_view(db, issue)


@tool(writes=True)
def close_milestone(db: Session, actor_id: str, milestone_id: str) -> dict:
    """Close a milestone. Only maintainers may, and only once every issue in it is done (move unfinished
    issues to another milestone first)."""
    milestone = fetch(db, Milestone, milestone_id, "milestone")
    _require(db, milestone.project_id, actor_id, "maintainer", "close milestones")
    if milestone.status == "closed":
        raise ToolError(f"milestone {milestone.title} ({milestone_id}) is already closed")
    view = _milestone_view(db, milestone)
    if view["unfinished"]:
        raise ToolError(f"milestone {milestone.title} still has unfinished issues: {', '.join(view['unfinished'])}; "
                        "finish them or move them to another milestone first")
    milestone.status = "closed"
    milestone.closed_at = now(db)
    return _milestone_view(db, milestone)


@tool(writes=True)
def delete_issue(db: Session, actor_id: str, issue_id: str) -> dict:
    """Delete an issue with its labels, comments and blocker links. Only maintainers may delete issues."""
    issue = fetch(db, Issue, issue_id, "issue")
    _require(db, issue.project_id, actor_id, "maintainer", "delete issues")
    for model, column in [(IssueLabel, IssueLabel.issue_id), (IssueComment, IssueComment.issue_id),
                          (Blocker, Blocker.issue_id), (Blocker, Blocker.blocked_by_id)]:
        for row in db.exec(select(model).where(column == issue_id)):
            db.delete(row)
    db.flush()
    db.delete(issue)
    return {"deleted": issue_id}


TOOLS = [find_person, list_projects, get_project, list_milestones, search_issues, get_issue, create_issue,
         update_issue, assign_issue, transition_issue, label_issue, add_comment, link_blocker, set_milestone,
         close_milestone, delete_issue]
