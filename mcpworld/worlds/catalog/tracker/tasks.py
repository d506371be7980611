"""Issue tracker tasks. Every task fails a no-op episode and passes with its reference solution."""

from __future__ import annotations

import re
from datetime import timedelta

from mcpworld.world import Check, Count, Entities, Outcome, Session, Task, call, db_time, entity, fetch

from .data import ISSUES, MILESTONES, NOW
from .models import Issue

PEOPLE = {"U01": "Alice Chen", "U02": "Bruno Costa", "U03": "Carmen Diaz", "U04": "Dev Malhotra",
          "U05": "Erin O'Neill", "U06": "Felix Braun", "U07": "Gita Sharma"}
# Wrong candidates for typed answers: every issue (id, title), milestone (title, id), person (name, first name, id).
ISSUE_NAMES = [v for iid, title, *_ in ISSUES for v in (iid, title)]
MILESTONE_NAMES = [v for mid, _, title, *_ in MILESTONES for v in (title, mid)]
PERSON_NAMES = [v for pid, name in PEOPLE.items() for v in (name, name.split()[0], pid)]
MS2_OPEN = {"WEB-1", "WEB-2", "WEB-3", "WEB-4"}  # the v2.3 issues that are not done


def issues_except(*ids: str) -> list[str]:
    """Every issue id and title but those of `ids` (issues an answer may name without being wrong)."""
    return [v for iid, title, *_ in ISSUES if iid not in ids for v in (iid, title)]


def issue_aliases(iid: str, *more: str) -> list[str]:
    return [iid, next(title for i, title, *_ in ISSUES if i == iid), *more]


def _mentions(text: str, word: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text, re.I) is not None


def commented(o: Outcome, issue_id: str, author_id: str, *words: str) -> Check:
    """Exactly one comment was added to `issue_id` by `author_id`, and it mentions `words` (whole words)."""
    rows = [r for r in o.diff.tables["issue_comment"].inserted
            if r["issue_id"] == issue_id and r["author_id"] == author_id]
    ok = len(rows) == 1 and all(_mentions(rows[0]["body"], w) for w in words)
    return Check(name=f"one comment by {author_id} on {issue_id} mentioning {', '.join(words)}", passed=ok,
                 detail="" if ok else f"found {[r['body'] for r in rows]}")


def finish_beta2(db: Session) -> None:
    """Beta 2's last issue, MOB-4, was done by Gita an hour ago: only the maintainer rule stops closing it."""
    issue = fetch(db, Issue, "MOB-4")
    issue.assignee_id, issue.status = "U07", "done"
    issue.updated_at = issue.resolved_at = NOW - timedelta(hours=1)


TASKS = [
    Task(
        id="start-footer-typo",
        instruction="I'm Carmen Diaz. Assign WEB-6 to me and start working on it.",
        solution=[call("find_person", query="Carmen"),
                  call("assign_issue", actor_id="U03", issue_id="WEB-6", assignee_id="U03"),
                  call("transition_issue", actor_id="U03", issue_id="WEB-6", status="in_progress")],
        verify=lambda o: [o.diff.updated("issue", "WEB-6", assignee_id="U03", status="in_progress",
                                         updated_at=db_time(NOW)),
                          o.diff.only("issue")],
    ),
    Task(
        id="refuse-viewer-edit",
        kind="refusal",
        reason="viewers-read-only",
        instruction="Erin O'Neill here. Change the priority of WEB-2 (Apple Pay) to urgent.",
        solution=[call("find_person", query="Erin"),
                  call("update_issue", actor_id="U05", issue_id="WEB-2", priority="urgent")],
        answer="I cannot change WEB-2: you are a viewer in the WEB project, and viewers are read-only there.",
    ),
    Task(
        id="refuse-skip-review",
        kind="refusal",
        reason="workflow",
        instruction="Carmen Diaz here. Bruno's fix for WEB-1 is fine: mark WEB-1 as done right away. It hasn't "
                    "been reviewed and doesn't need to be.",
        solution=[call("get_issue", issue_id="WEB-1"),
                  call("transition_issue", actor_id="U03", issue_id="WEB-1", status="done")],
        answer="I cannot move WEB-1 from in_progress straight to done: the workflow requires it to go through "
               "review first (open -> in_progress -> review -> done).",
        difficulty="medium",
    ),
    Task(
        id="refuse-done-while-blocked",
        kind="refusal",
        reason="blockers",
        instruction="Carmen Diaz here. I have approved the review of WEB-4, please mark it done.",
        solution=[call("get_issue", issue_id="WEB-4"),
                  call("transition_issue", actor_id="U03", issue_id="WEB-4", status="done")],
        answer="I cannot mark WEB-4 done yet: it is blocked by WEB-3 (Upgrade payment SDK to v5), which is still "
               "in review.",
        difficulty="medium",
        split="test",
    ),
    Task(
        id="refuse-assign-non-member",
        kind="refusal",
        reason="members-only",
        instruction="Alice Chen here. Assign WEB-2 (Apple Pay) to Dev Malhotra.",
        solution=[call("find_person", query="Dev Malhotra"),
                  call("get_project", project_id="WEB"),
                  call("assign_issue", actor_id="U01", issue_id="WEB-2", assignee_id="U04")],
        answer="I cannot assign WEB-2 to Dev Malhotra: he is not a member of the WEB project, and only members "
               "can be assigned.",
    ),
    Task(
        id="refuse-developer-delete",
        kind="refusal",
        reason="maintainers-only",
        instruction="Bruno Costa here. Delete WEB-8, it's a duplicate of WEB-1.",
        solution=[call("get_issue", issue_id="WEB-8"),
                  call("delete_issue", actor_id="U02", issue_id="WEB-8")],
        answer="I cannot delete WEB-8 for you: only maintainers can delete issues, and you are a developer in "
               "WEB. Alice Chen (maintainer) can delete it.",
    ),
    Task(
        id="refuse-self-approval",
        kind="refusal",
        reason="no-self-approval",
        instruction="Bruno Costa here. My rate limiter fix in API-3 is ready: move it from review to done.",
        solution=[call("find_person", query="Bruno"),
                  call("get_issue", issue_id="API-3")],
        answer="I can't mark API-3 done for you: you are its assignee, and nobody may approve their own work. "
               "Another developer or maintainer of the API project has to move it to done.",
        difficulty="medium",
    ),
    Task(
        id="refuse-frozen-milestone",
        kind="refusal",
        reason="milestone-freeze",
        instruction="Bruno Costa here. File a feature 'Gift cards at checkout' in the web storefront, in the v2.3 "
                    "milestone. It has to be v2.3: if it can't go there, don't file it at all.",
        solution=[call("list_milestones", project_id="WEB")],
        answer="I can't put it in v2.3: that milestone is due on 18 May, 7 days from now, so it is frozen and "
               "takes no new issues.",
        difficulty="medium",
        split="test",
    ),
    Task(
        id="delete-duplicate",
        instruction="Alice Chen here. WEB-8 is a duplicate of WEB-1. Leave a comment on WEB-1 saying WEB-8 was "
                    "a duplicate of it, then delete WEB-8.",
        solution=[call("get_issue", issue_id="WEB-8"),
                  call("add_comment", actor_id="U01", issue_id="WEB-1",
                       body="Deleted the duplicate report of this issue: WEB-8"),
                  call("delete_issue", actor_id="U01", issue_id="WEB-8")],
        verify=lambda o: [o.diff.deleted("issue", "WEB-8"), commented(o, "WEB-1", "U01", "duplicate", "WEB-8"),
                          o.diff.only("issue", "issue_comment")],
        difficulty="medium",
    ),
    Task(
        id="ship-payment-chain",
        instruction="Alice Chen here. The reviews of WEB-3 and WEB-4 are both approved. Mark both as done.",
        solution=[call("get_issue", issue_id="WEB-4"),
                  call("transition_issue", actor_id="U01", issue_id="WEB-3", status="done"),
                  call("transition_issue", actor_id="U01", issue_id="WEB-4", status="done")],
        verify=lambda o: [o.diff.updated("issue", "WEB-3", status="done", resolved_at=db_time(NOW)),
                          o.diff.updated("issue", "WEB-4", status="done", resolved_at=db_time(NOW)),
                          o.diff.only("issue")],
        difficulty="medium",
    ),
    Task(
        id="close-overdue-beta",
        instruction="Gita Sharma here. The Beta 1 milestone of the mobile app is overdue. Move every unfinished "
                    "issue in it to Beta 2, then close Beta 1.",
        solution=[call("list_milestones", project_id="MOB"),
                  call("set_milestone", actor_id="U07", issue_id="MOB-1", milestone_id="MS-6"),
                  call("set_milestone", actor_id="U07", issue_id="MOB-3", milestone_id="MS-6"),
                  call("close_milestone", actor_id="U07", milestone_id="MS-5")],
        verify=lambda o: [o.diff.updated("issue", "MOB-1", milestone_id="MS-6", status="in_progress"),
                          o.diff.updated("issue", "MOB-3", milestone_id="MS-6", status="review"),
                          o.diff.updated("milestone", "MS-5", status="closed", closed_at=db_time(NOW)),
                          o.diff.only("issue", "milestone")],
        difficulty="hard",
    ),
    Task(
        id="refuse-developer-close-milestone",
        kind="refusal",
        reason="maintainers-only",
        setup=finish_beta2,
        instruction="Carmen Diaz here. Every issue in the mobile app's Beta 2 milestone is done now: close the "
                    "Beta 2 milestone.",
        solution=[call("list_milestones", project_id="MOB"),
                  call("close_milestone", actor_id="U03", milestone_id="MS-6")],
        answer="I cannot close Beta 2: only maintainers can close milestones, and you are a developer in MOB "
               "(Gita Sharma is its maintainer).",
        split="test",
    ),
    Task(
        id="file-webhook-bug",
        instruction="Bruno Costa here. File a bug in the Public API project: 'Webhook signature check fails after "
                    "key rotation', high priority, labelled auth, in the 2026-Q2 milestone, assigned to Felix "
                    "Braun.",
        solution=[call("find_person", query="Felix"),
                  call("list_milestones", project_id="API"),
                  call("create_issue", actor_id="U02", project_id="API",
                       title="Webhook signature check fails after key rotation", type="bug", priority="high",
                       assignee_id="U06", milestone_id="MS-4", labels=["auth"])],
        verify=lambda o: [o.diff.inserted("issue", 1, id="API-5", project_id="API", type="bug", priority="high",
                                          status="open", assignee_id="U06", reporter_id="U02", milestone_id="MS-4",
                                          created_at=db_time(NOW)),
                          o.diff.inserted("issue_label", 1, issue_id="API-5", label_id="LB-05"),
                          o.diff.inserted("issue_label", 1),
                          o.diff.updated("project", "API", next_number=6)],
        difficulty="hard",
    ),
    Task(
        id="record-blocker",
        instruction="Dev Malhotra here. API-4 (remove v1 endpoints) can't ship until the pagination docs in "
                    "API-2 are done. Record that API-2 blocks API-4.",
        solution=[call("get_issue", issue_id="API-4"),
                  call("get_issue", issue_id="API-2"),
                  call("link_blocker", actor_id="U04", issue_id="API-4", blocked_by_id="API-2")],
        verify=lambda o: [o.diff.inserted("blocker", 1, issue_id="API-4", blocked_by_id="API-2"),
                          o.diff.unchanged("issue_label", "issue_comment", "milestone")],
    ),
    Task(
        id="request-changes",
        instruction="Carmen Diaz here. The review of MOB-3 found a bug: send it back to in progress and comment "
                    "on it that the opt-in dialog shows twice on first launch.",
        solution=[call("get_issue", issue_id="MOB-3"),
                  call("transition_issue", actor_id="U03", issue_id="MOB-3", status="in_progress"),
                  call("add_comment", actor_id="U03", issue_id="MOB-3",
                       body="Review found a bug: on first launch the opt-in dialog shows twice")],
        verify=lambda o: [o.diff.updated("issue", "MOB-3", status="in_progress", assignee_id="U03"),
                          commented(o, "MOB-3", "U03", "first launch", "twice"),
                          o.diff.only("issue", "issue_comment")],
        split="test",
    ),
    Task(
        id="relabel-footer-typo",
        instruction="Alice Chen here. On WEB-6, add the frontend label and remove good-first-issue.",
        solution=[call("get_project", project_id="WEB"),
                  call("get_issue", issue_id="WEB-6"),
                  call("label_issue", actor_id="U01", issue_id="WEB-6", add=["frontend"],
                       remove=["good-first-issue"])],
        verify=lambda o: [o.diff.inserted("issue_label", 1, issue_id="WEB-6", label_id="LB-01"),
                          o.diff.deleted("issue_label", "WEB-6|LB-04"),
                          o.diff.inserted("issue_label", 1)],
    ),
    Task(
        id="overdue-milestones",
        kind="answer",
        instruction="Which open milestones are past their due date, and how many unfinished issues does each "
                    "still have?",
        solution=[call("list_milestones", status="open")],
        answer="Only Beta 1 (MS-5, mobile app, due 2026-05-09) is overdue; it still has 2 unfinished issues "
               "(MOB-1 and MOB-3).",
        expect=[entity("Beta 1", "MS-5", among=MILESTONE_NAMES), Count(value=2, allow=[1])],  # "only one is overdue"
        difficulty="medium",
    ),
    Task(
        id="bruno-review-queue",
        kind="answer",
        instruction="How many issues assigned to Bruno Costa are waiting in review, and which are they?",
        solution=[call("find_person", query="Bruno"),
                  call("search_issues", assignee_id="U02", status="review")],
        answer="Two: WEB-4 (Enable 3-D Secure) and API-3 (Rate limiter returns 500 instead of 429).",
        expect=[Count(value=2, allow=[500, 429]),
                Entities(expected=[issue_aliases("WEB-4", "3-D Secure"), issue_aliases("API-3")], among=ISSUE_NAMES)],
    ),
    Task(
        id="why-web4-blocked",
        kind="answer",
        instruction="What is blocking WEB-4, what state is the blocker in, and who is assigned to the blocker?",
        solution=[call("get_issue", issue_id="WEB-4"),
                  call("get_issue", issue_id="WEB-3")],
        answer="WEB-4 is blocked by WEB-3 (Upgrade payment SDK to v5), which is in review and assigned to Carmen "
               "Diaz.",
        # WEB-4 is the subject, not a wrong pick
        expect=[Entities(expected=[issue_aliases("WEB-3")], among=issues_except("WEB-4"), label="the blocker"),
                entity("review", "in review", "in_review", "under review", among=["open", "in progress", "in_progress"],
                       label="its status"),
                entity("Carmen Diaz", "Carmen", "U03", among=PERSON_NAMES, label="its assignee")],
    ),
    Task(
        id="v23-progress",
        kind="answer",
        instruction="In the web storefront's v2.3 milestone, which issues are already done, and how many are not "
                    "done yet?",
        solution=[call("list_milestones", project_id="WEB"),
                  call("search_issues", milestone_id="MS-2")],
        answer="Only WEB-9 (Update cart page copy) is done; 4 issues are not done yet (WEB-1, WEB-2, WEB-3 and "
               "WEB-4).",
        # the issues not done may be listed too, so they are no wrong candidates for the done one
        expect=[Entities(expected=[issue_aliases("WEB-9")], label="the done issue",
                         among=issues_except(*MS2_OPEN)),
                Count(value=4, allow=[1, 5])],
        difficulty="medium",
        split="test",
    ),
]
