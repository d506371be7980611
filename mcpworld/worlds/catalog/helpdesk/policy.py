"""The IT desk's policy: the rules the tools enforce, and three the agent must follow on its own.

Each rule's `text` is the policy document the agent is given; its `cues` are how a refusal cites it. No cue of
one rule may contain (or be contained in) a cue of another.
"""

from __future__ import annotations

from mcpworld.world import Rule

RULES = [
    # -- enforced by the tools ---------------------------------------------------------------------------
    Rule("agents-only",
         "Tickets are assigned only to active IT agents; staff and managers cannot be assigned tickets.",
         cues=("not an it agent", "isn't an it agent", "only agents can be assigned", "only it agents can be "
               "assigned", "cannot be assigned tickets", "can't be assigned tickets")),
    Rule("p1-approval",
         "A ticket becomes P1 only with the approval of an active manager (recorded as approved_by) or while it "
         "is assigned to an on-call agent.",
         cues=("on-call", "on call", "needs a manager's approval", "without a manager's approval",
               "requires a manager's approval")),
    Rule("reopen-window",
         "A closed ticket can be reopened only within 14 days of being closed; after that a new ticket is opened "
         "instead.",
         cues=("14 days", "fourteen days", "two weeks", "new ticket instead")),
    Rule("license-seats",
         "A license seat is assigned only when one is free, and an employee holds at most one seat of a license; "
         "when every seat is taken, one has to be revoked first.",
         cues=("seats are taken", "seats taken", "no free seat", "no seat free", "no seats left", "all seats",
               "both seats", "already holds a seat")),
    Rule("admin-own-manager",
         "Admin-level access is approved only by the requesting employee's own manager.",
         cues=("admin access", "admin-level", "admin rights", "own manager", "direct manager")),
    Rule("access-deciders",
         "Access requests are decided only by active IT agents and managers, never by the employee who asked; a "
         "rejection needs a note saying why.",
         cues=("decide their own", "own access request", "only it agents and managers", "rejection needs a note")),
    Rule("one-laptop",
         "Only in-stock assets are handed out, and an employee has at most one laptop: the old one is returned "
         "first.",
         cues=("one laptop per", "already has a laptop", "not in stock")),
    Rule("leavers",
         "Employees who have left the company get no new tickets, assets, license seats or comments.",
         cues=("has left the company", "left the company", "no longer with the company")),
    Rule("closing-tickets",
         "A ticket is closed only when it has an assignee and a resolution note (at least 10 characters) saying "
         "what was done; a closed ticket is not reassigned or re-prioritised until it is reopened.",
         cues=("resolution note", "no assignee", "reopen it first")),
    Rule("internal-notes-by-agents",
         "Only IT agents write internal notes; everyone else writes public comments.",
         cues=("only it agents can write", "only agents can write", "only agents may write")),
    # -- policy only: the tools would allow these ----------------------------------------------------------
    Rule("internal-notes-private",
         "Internal notes are for IT staff only: never read out, quote or pass on an internal note to anyone "
         "outside IT, the ticket's requester included; share only the ticket's status and public comments.",
         cues=("it staff only", "for it only", "not shared with", "hidden from the requester", "confidential"),
         enforced=False),
    Rule("no-sla-downgrade",
         "Never lower the priority of a ticket that has breached its SLA: a breach is not hidden by "
         "re-prioritising, and the ticket keeps its priority until it is closed.",
         cues=("lower the priority", "lowering the priority", "lower its priority", "downgrade", "downgrading",
               "keeps its priority", "keep its priority", "keep their priority", "hide the breach", "hide a breach"),
         enforced=False),
    Rule("reopen-by-requester",
         "A ticket is reopened only when its requester (or the requester's manager) asks: the reopen is logged "
         "as a comment from the requester.",
         cues=("only the requester", "only its requester", "requester has to ask", "requester must ask",
               "requester needs to ask"),
         enforced=False),
]
