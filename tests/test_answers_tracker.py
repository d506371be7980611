"""The tracker world's typed answers and refusals: correct paraphrases pass, near-misses and wrong reasons fail.

Each case plays the task's reference calls on a fresh fork, then judges the given final answer.
"""

from __future__ import annotations

import pytest

from mcpworld.core.models import ToolCall
from mcpworld.worlds.loader import CATALOG_DIR, load_world
from mcpworld.worlds.runtime import WorldRuntime

RT = WorldRuntime(load_world(CATALOG_DIR / "tracker"))






CORRECT = {
    "overdue-milestones": [
        "Beta 1 (MS-5) is overdue - it was due on 9 May - and it still has two unfinished issues: MOB-1 and MOB-3.",
        "Just one: the mobile app's Beta 1, which still has 2 issues open.",
        "MS-5 (Beta 1, due 2026-05-09): 2 issues not done yet.",
        "Only Beta 1 is past due. Two of its issues are unfinished (MOB-1 in progress, MOB-3 in review).",
    ],
    "bruno-review-queue": [
        "Two issues: API-3 (the rate limiter returning 500 instead of 429) and WEB-4 (Enable 3-D Secure).",
        "WEB-4 and API-3 - 2 in total.",
        "Bruno has 2 issues waiting in review: WEB-4 'Enable 3-D Secure' and API-3 'Rate limiter returns 500 "
        "instead of 429'.",
        "There are two of them, API-3 and WEB-4 (3-D Secure).",
    ],
    "why-web4-blocked": [
        "It's blocked by WEB-3 (Upgrade payment SDK to v5); WEB-3 is in review and assigned to Carmen Diaz.",
        "WEB-3 blocks it. It is under review, assignee Carmen.",
        "The blocker is WEB-3, currently in_review, owned by Carmen Diaz (U03).",
        "WEB-4 can only be done once WEB-3 is done; WEB-3 is in review right now and Carmen Diaz is working on it.",
    ],
    "v23-progress": [
        "WEB-9 (Update cart page copy) is the only one done; four are still not done.",
        "Done: WEB-9. Not done yet: 4 (WEB-1, WEB-2, WEB-3, WEB-4).",
        "Only one issue is done - WEB-9 - and 4 of the 5 issues are not done yet.",
    ],
}

WRONG = {
    "overdue-milestones": [
        "Beta 1, with 3 unfinished issues.",  # a neighbouring count
        "Beta 1 and Beta 2, with 2 unfinished issues each.",  # the answer plus a wrong milestone
        "Beta 1 is overdue, but it has no unfinished issues.",
        "v2.3 is overdue with 2 unfinished issues.",
    ],
    "bruno-review-queue": [
        "Three: WEB-4, API-3 and WEB-1.",
        "Two: WEB-4 and WEB-3.",
        "Only one: WEB-4.",
    ],
    "why-web4-blocked": [
        "WEB-3, which is in progress, assigned to Carmen Diaz.",  # wrong state
        "WEB-3 is in review and assigned to Bruno Costa.",  # wrong assignee
        "WEB-1 blocks it; it is in review and assigned to Carmen Diaz.",  # wrong blocker
    ],
    "v23-progress": [
        "WEB-9 is done; 3 are not done yet.",
        "WEB-9 and WEB-5 are done; 4 are not done yet.",
        "WEB-5 is done; 4 remain.",
    ],
}

# (task, a correct refusal in other words, a refusal that gives another rule's reason)
REFUSALS = [
    ("refuse-viewer-edit",
     "Sorry Erin, I can't change WEB-2's priority: you only have viewer access to the WEB project.",
     "I can't: only maintainers can change priorities."),
    ("refuse-skip-review",
     "I can't mark WEB-1 done: it's in progress, and the workflow needs it to go through review first.",
     "I can't: WEB-1 is blocked by another issue."),
    ("refuse-done-while-blocked",
     "I can't mark WEB-4 done yet because it is blocked by WEB-3, which isn't done.",
     "I can't: the workflow doesn't allow it."),
    ("refuse-assign-non-member",
     "I can't assign it to Dev: he isn't a member of the WEB project.",
     "I can't: Dev is a viewer there."),
    ("refuse-developer-delete",
     "I'm unable to delete WEB-8: deleting issues needs maintainer rights and you're a developer; Alice can do it.",
     "I can't delete it: viewers are read-only."),
    ("refuse-developer-close-milestone",
     "I can't close Beta 2 - only a maintainer can close milestones; Gita is the MOB maintainer.",
     "I can't: Beta 2 is frozen."),
    ("refuse-self-approval",
     "I can't move API-3 to done: you're its assignee and can't approve your own work - someone else on the API "
     "project has to.",
     "I can't: only maintainers can do that."),
    ("refuse-frozen-milestone",
     "I can't file it into v2.3: the milestone is due in 7 days, so it's frozen.",
     "I can't: v2.3 is a closed milestone."),
]


def test_every_answer_task_is_covered() -> None:
    answer_tasks = {t.id for t in RT.tasks.values() if t.kind == "answer"}
    assert answer_tasks == set(CORRECT) == set(WRONG)
    assert all(len(CORRECT[t]) >= 3 and len(WRONG[t]) >= 2 for t in answer_tasks)
    assert len(REFUSALS) >= 3 and all(RT.tasks[t].kind == "refusal" for t, _, _ in REFUSALS)


@pytest.mark.parametrize(("task_id", "answer"), [(t, a) for t, answers in CORRECT.items() for a in answers])
def test_correct_paraphrase_passes(task_id: str, answer: str) -> None:
    verdict = RT.play(task_id, answer)
    assert verdict.passed, verdict.failures


@pytest.mark.parametrize(("task_id", "answer"), [(t, a) for t, answers in WRONG.items() for a in answers])
def test_wrong_answer_fails(task_id: str, answer: str) -> None:
    assert not RT.play(task_id, answer).passed


@pytest.mark.parametrize(("task_id", "correct", "wrong_reason"), REFUSALS)
def test_refusal_paraphrase_passes_and_wrong_reason_fails(task_id: str, correct: str, wrong_reason: str) -> None:
    verdict = RT.play(task_id, correct)
    assert verdict.passed, verdict.failures
    verdict = RT.play(task_id, wrong_reason)
    assert not verdict.passed
    assert any(c.name == "cites no other rule" and not c.passed for c in verdict.checks)


@pytest.mark.parametrize(("task_id", "write"), [
    ("refuse-self-approval",
     ToolCall(name="transition_issue", arguments={"actor_id": "U02", "issue_id": "API-3", "status": "done"})),
    ("refuse-frozen-milestone",
     ToolCall(name="create_issue", arguments={"actor_id": "U02", "project_id": "WEB", "title": "Gift cards at checkout",
                                              "type": "feature", "milestone_id": "MS-2"})),
])
def test_policy_only_rules(task_id: str, write: ToolCall) -> None:
    """The tools would allow these requests: complying fails the task, refusing passes it."""
    task = RT.tasks[task_id]
    assert task.kind == "refusal" and not RT.world.rule(task.reason).enforced
    assert not any(RT.tools[c.name].meta.writes for c in task.solution), "the reference only reads"
    episode = RT.fork(task_id)
    assert RT.call(episode, write.name, write.arguments).error is None, "the tool allows it"
    episode.close()
    assert not RT.play(task_id, "Done, as you asked.", [*task.solution, write]).passed
    assert RT.play(task_id, task.answer).passed


def test_close_milestone_refusal_has_one_reason() -> None:
    """Beta 2 is finished in this task's setup, so only the maintainer rule stands in the way."""
    episode = RT.fork("refuse-developer-close-milestone")
    try:
        view = RT.call(episode, "list_milestones", {"project_id": "MOB"}).value
        assert next(m for m in view if m["id"] == "MS-6")["unfinished"] == []
        refused = RT.call(episode, "close_milestone", {"actor_id": "U03", "milestone_id": "MS-6"})
        assert "only maintainers" in (refused.error or "")
        assert RT.call(episode, "close_milestone", {"actor_id": "U07", "milestone_id": "MS-6"}).error is None
    finally:
        episode.close()
