"""Issue tracker tasks. Every task fails a no-op episode and passes with its reference solution."""

from __future__ import annotations

from mcpworld.servers.envs.world import Check, Outcome, Task, call, db_time

from .data import NOW


def commented(o: Outcome, issue_id: str, author_id: str, *words: str) -> Check:
    """Exactly one comment was added to `issue_id` by `author_id`, and it mentions `words`."""
    rows = [r for r in o.diff.tables["issue_comment"].inserted
            if r["issue_id"] == issue_id and r["author_id"] == author_id]
    ok = len(rows) == 1 and all(w.lower() in rows[0]["body"].lower() for w in words)
    return Check(name=f"one comment by {author_id} on {issue_id} mentioning {', '.join(words)}", passed=ok,
                 detail="" if ok else f"found {[r['body'] for r in rows]}")


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
        instruction="Erin O'Neill here. Change the priority of WEB-2 (Apple Pay) to urgent.",
        solution=[call("find_person", query="Erin"),
                  call("update_issue", actor_id="U05", issue_id="WEB-2", priority="urgent")],
        answer="I cannot change WEB-2: you are a viewer in the WEB project, and viewers cannot modify issues. "
               "A developer or maintainer (e.g. Alice Chen) can.",
        verify=lambda o: o.refused("viewer", "read-only", "read only"),
    ),
    Task(
        id="refuse-skip-review",
        kind="refusal",
        instruction="Bruno Costa here. Mark WEB-1 as done right away. It hasn't been reviewed and doesn't need "
                    "to be.",
        solution=[call("get_issue", issue_id="WEB-1"),
                  call("transition_issue", actor_id="U02", issue_id="WEB-1", status="done")],
        answer="I cannot move WEB-1 from in_progress straight to done: the workflow requires it to go through "
               "review first (open -> in_progress -> review -> done).",
        verify=lambda o: o.refused("review", "workflow"),
        difficulty="medium",
    ),
    Task(
        id="refuse-done-while-blocked",
        kind="refusal",
        instruction="Bruno Costa here. The review of WEB-4 is approved, please mark it done.",
        solution=[call("get_issue", issue_id="WEB-4"),
                  call("transition_issue", actor_id="U02", issue_id="WEB-4", status="done")],
        answer="I cannot mark WEB-4 done yet: it is blocked by WEB-3 (Upgrade payment SDK to v5), which is still "
               "in review.",
        verify=lambda o: o.refused("WEB-3", "blocked", "blocker"),
        difficulty="medium",
        split="test",
    ),
    Task(
        id="refuse-assign-non-member",
        kind="refusal",
        instruction="Alice Chen here. Assign WEB-2 (Apple Pay) to Dev Malhotra.",
        solution=[call("find_person", query="Dev Malhotra"),
                  call("get_project", project_id="WEB"),
                  call("assign_issue", actor_id="U01", issue_id="WEB-2", assignee_id="U04")],
        answer="I cannot assign WEB-2 to Dev Malhotra: he is not a member of the WEB project, and only members "
               "can be assigned.",
        verify=lambda o: o.refused("not a member", "isn't a member", "non-member", "not part of"),
    ),
    Task(
        id="refuse-developer-delete",
        kind="refusal",
        instruction="Bruno Costa here. Delete WEB-8, it's a duplicate of WEB-1.",
        solution=[call("get_issue", issue_id="WEB-8"),
                  call("delete_issue", actor_id="U02", issue_id="WEB-8")],
        answer="I cannot delete WEB-8 for you: only maintainers can delete issues, and you are a developer in "
               "WEB. Alice Chen (maintainer) can delete it.",
        verify=lambda o: o.refused("maintainer"),
    ),
    Task(
        id="delete-duplicate",
        instruction="Alice Chen here. WEB-8 is a duplicate of WEB-1. Leave a comment on WEB-1 saying WEB-8 was "
                    "a duplicate of it, then delete WEB-8.",
        solution=[call("get_issue", issue_id="WEB-8"),
                  call("add_comment", actor_id="U01", issue_id="WEB-1",
                       body="WEB-8 was a duplicate of this issue and has been deleted."),
                  call("delete_issue", actor_id="U01", issue_id="WEB-8")],
        verify=lambda o: [o.diff.deleted("issue", "WEB-8"), commented(o, "WEB-1", "U01", "WEB-8"),
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
        instruction="Carmen Diaz here. Close the Beta 2 milestone in the mobile app project.",
        solution=[call("list_milestones", project_id="MOB"),
                  call("close_milestone", actor_id="U03", milestone_id="MS-6")],
        answer="I cannot close Beta 2: only maintainers can close milestones, and you are a developer in MOB "
               "(Gita Sharma is the maintainer). It also still has an unfinished issue, MOB-4.",
        verify=lambda o: o.refused("maintainer"),
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
                       body="Review: the opt-in dialog shows twice on first launch.")],
        verify=lambda o: [o.diff.updated("issue", "MOB-3", status="in_progress", assignee_id="U03"),
                          commented(o, "MOB-3", "U03", "twice"),
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
        verify=lambda o: [o.answer_mentions("Beta 1", "2"), o.answer_omits("v2.3", "v2.4", "2026-Q2", "Beta 2", "v2.2"),
                          o.diff.unchanged()],
        difficulty="medium",
    ),
    Task(
        id="bruno-review-queue",
        kind="answer",
        instruction="Which issues assigned to Bruno Costa are waiting in review?",
        solution=[call("find_person", query="Bruno"),
                  call("search_issues", assignee_id="U02", status="review")],
        answer="Two: WEB-4 (Enable 3-D Secure) and API-3 (Rate limiter returns 500 instead of 429).",
        verify=lambda o: [o.answer_mentions("WEB-4", "API-3"), o.answer_omits("WEB-1", "WEB-9", "WEB-3"),
                          o.diff.unchanged()],
    ),
    Task(
        id="why-web4-blocked",
        kind="answer",
        instruction="What is blocking WEB-4, and what state is the blocker in?",
        solution=[call("get_issue", issue_id="WEB-4")],
        answer="WEB-4 is blocked by WEB-3 (Upgrade payment SDK to v5), which is in review.",
        verify=lambda o: [o.answer_mentions("WEB-3", "review"), o.diff.unchanged()],
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
        verify=lambda o: [o.answer_mentions("WEB-9", "4"), o.answer_omits("WEB-5", "WEB-6", "WEB-7", "WEB-8"),
                          o.diff.unchanged()],
        difficulty="medium",
        split="test",
    ),
]
