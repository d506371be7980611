"""The issue tracker's policy: one rule per permission or workflow rule the tools enforce, plus rules only the
agent can follow.

A refusal cites its rule by one of the rule's cues and no cue of another rule, so every cue below is a phrase
only an answer about that rule would use (`mcpworld world validate` rejects cues that overlap). Cues avoid
words every tracker answer uses ("review", "done", "unfinished", "maintainer" alone).
"""

from __future__ import annotations

from mcpworld.world import Rule

RULES = [
    # -- enforced by the tools --------------------------------------------------------------------------------
    Rule("viewers-read-only",
         "Viewers of a project are read-only there: they cannot file, edit, assign, move, label, comment on, "
         "link or re-milestone its issues, and cannot be assigned any.",
         cues=("viewer", "viewers", "read-only", "read only")),
    Rule("members-only",
         "Only members of a project act on its issues, and an issue is assigned only to a developer or "
         "maintainer of its own project.",
         cues=("not a member", "isn't a member", "non-member", "only members", "not part of the project",
               "not in the project")),
    Rule("maintainers-only",
         "Only maintainers may delete issues or close milestones.",
         cues=("only maintainers", "only a maintainer", "only the maintainer", "maintainer rights",
               "maintainer permission", "maintainer role", "not a maintainer", "needs a maintainer")),
    Rule("workflow",
         "Issues move open -> in_progress -> review -> done; review may go back to in_progress, in_progress "
         "back to open, and done may be reopened. No step is skipped: work goes through review before done.",
         cues=("workflow", "through review", "skip review", "skipping review", "review first", "straight to done",
               "directly to done")),
    Rule("assignee-needed",
         "An issue needs an assignee before work on it starts, and one in progress or in review cannot be "
         "unassigned (move it back to open first).",
         cues=("needs an assignee", "no assignee", "without an assignee", "unassign", "unassigning")),
    Rule("blockers",
         "An issue cannot be done while an issue blocking it is not done; blockers are in the same project and "
         "never form a cycle.",
         cues=("blocked by", "blocker", "blockers", "blocking", "blocks it", "cycle")),
    Rule("milestone-rules",
         "Issues go only into open milestones of their own project, and a milestone is closed only once every "
         "issue in it is done (move the rest to another milestone first).",
         cues=("closed milestone", "milestone is closed", "already closed", "another project's milestone",
               "still has open issues")),
    # -- policy only: the tools would allow these, the agent must not ----------------------------------------
    Rule("no-self-approval",
         "Nobody approves their own work: the assignee of an issue may not move it from review to done; "
         "another developer or maintainer of the project does that.",
         cues=("own work", "own review", "own issue", "approve their own", "approve your own", "self-approval",
               "self-approve", "four-eyes", "four eyes"),
         enforced=False),
    Rule("milestone-freeze",
         "A milestone due within a week (7 days or fewer from today) is frozen: no issue may be filed into it "
         "or moved into it (file it without a milestone or in a later one).",
         cues=("frozen", "freeze", "7 days", "seven days", "a week"),
         enforced=False),
]
