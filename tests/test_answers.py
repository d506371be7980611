"""Typed answers: exploits that substring checks let through fail, and honest paraphrases pass."""

from __future__ import annotations

import datetime

import pytest
from pydantic import TypeAdapter, ValidationError

from mcpworld.worlds.answers import (
    AnswerContext,
    AnswerPart,
    Count,
    DateAnswer,
    Entities,
    Number,
    TimeAnswer,
    YesNo,
    check_answer,
    entity,
    refusal_checks,
)

CTX = AnswerContext()
APRIL_4 = datetime.date(2026, 4, 4)
STATUS = entity("delayed", among=["on time", "scheduled", "cancelled"])


def verdict(answer: str | None, *parts: AnswerPart, ctx: AnswerContext = CTX) -> bool:
    """Whether the parts' checks pass (the length check is tested on its own)."""
    return all(check_answer(answer, list(parts), ctx)[:-1])


def detail(answer: str | None, part: AnswerPart, ctx: AnswerContext = CTX) -> str:
    return check_answer(answer, [part], ctx)[0].detail


# --- counts and numbers ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [
    "eight", "8", "Eight.", "8 seats are still free in business class",
    "There are 8 business seats left on MW101-0603.", "8.00", "There are 8 seats left as of 2026-06-01.",
])
def test_count_paraphrases_pass(answer: str) -> None:
    assert verdict(answer, Count(value=8))


@pytest.mark.parametrize("answer, found", [
    ("18 business seats", "18"),
    ("8 or 12", "8, 12"),
    ("8, 18, 28", "8, 18, 28"),
    ("eight or twelve", "8, 12"),
    ("8 seats, as of 2026", "8, 2026"),
])
def test_count_conflicts_fail(answer: str, found: str) -> None:
    assert detail(answer, Count(value=8)) == f"expected 8; the answer states {found}"


def test_count_two_needs_a_free_standing_two() -> None:
    assert verdict("2 issues are open as of 2026-06-01", Count(value=2))
    assert verdict("two issues", Count(value=2))
    assert not verdict("Issues as of 2026-06-01", Count(value=2))
    assert detail("Issues as of 2026-06-01", Count(value=2)) == "expected 2; found no count"


@pytest.mark.parametrize("answer", ["E03", "Ticket T-1003 is open", "Customer CU03", "mail e3@example.com",
                                    "Version v3.1", "Done for 2026-Q3"])
def test_ids_and_emails_supply_no_numbers(answer: str) -> None:
    assert detail(answer, Count(value=3)) == "expected 3; found no count"


def test_entity_names_supply_no_numbers() -> None:
    beta = entity("Beta 1", among=["Beta 2", "Beta 10"])
    assert not verdict("Beta 1 has 2 open issues", Count(value=2))  # undeclared, "Beta 1" reads as a 1
    assert verdict("Beta 1 has 2 open issues", beta, Count(value=2))
    assert verdict("Beta 1 has two open issues", beta, Count(value=2))
    assert not verdict("Beta 1 has 1 open issue", beta, Count(value=2))


def test_ordinals_and_pronoun_one_are_not_counts() -> None:
    assert not verdict("the 1st", Count(value=1))
    assert not verdict("the third one", Count(value=3))
    assert not verdict("twenty-first", Count(value=21))
    assert verdict("The one by the window: 2 seats", Count(value=2))
    assert verdict("No one else; 2 seats", Count(value=2))


@pytest.mark.parametrize("answer", ["one", "only one", "a single seat", "1 issue"])
def test_count_of_one(answer: str) -> None:
    assert verdict(answer, Count(value=1))


@pytest.mark.parametrize("answer, passed", [
    ("There are no seats left.", True), ("none", True), ("zero", True), ("0", True), ("No, there are 3", False),
])
def test_count_of_zero(answer: str, passed: bool) -> None:
    assert verdict(answer, Count(value=0)) is passed


@pytest.mark.parametrize("answer, value", [
    ("1,000", 1000), ("$1,000.50", 1000.5), ("450.00 EUR", 450), ("-300", -300), ("12.5%", 12.5),
    ("twenty-one", 21), ("one hundred and five", 105), ("two thousand five hundred", 2500), ("ninety", 90),
    ("a 2-hour delay", 2), ("€34.99", 34.99),
])
def test_number_formats_and_words(answer: str, value: float) -> None:
    assert verdict(answer, Number(value=value))
    assert not verdict(answer, Number(value=value + 1))


def test_money_total_with_its_parts_allowed() -> None:
    total = Number(value=450, allow=[110, 340], label="total paid")
    assert verdict("You paid $450.00 in total (110.00 for INS9RT and 340.00 for DLY2CC)", total)
    assert verdict("450", total)
    assert not verdict("You paid 450 or maybe 560", total)
    assert detail("You paid 450 or maybe 560", total) == "expected 450; the answer states 450, 560"
    assert check_answer("450", [total], CTX)[0].name == "answer states total paid: 450"


def test_number_tolerance() -> None:
    assert verdict("63.70", Number(value=63.7))
    assert verdict("about 63.704", Number(value=63.7))
    assert not verdict("63.8", Number(value=63.7))
    assert verdict("63.8", Number(value=63.7, tolerance=0.1))


def test_several_numeric_parts_do_not_conflict() -> None:
    assert verdict("Subtotal 63.70, tax 11.24", Number(value=63.7), Number(value=11.24))
    assert not verdict("Subtotal 63.70, tax 11.24, fee 5", Number(value=63.7), Number(value=11.24))


def test_instruction_numbers_are_echoes() -> None:
    ctx = AnswerContext(instruction="How many seats on flight 101 are still free?")
    assert verdict("8 seats on flight 101", Count(value=8), ctx=ctx)
    assert not verdict("8 seats on flight 101", Count(value=8))
    assert not verdict("101", Count(value=8), ctx=ctx)  # an echo alone states nothing


def test_the_expected_value_counts_even_when_echoed() -> None:
    ctx = AnswerContext(instruction="Do I have 2 open issues or 3?")
    assert verdict("You have 2.", Count(value=2), ctx=ctx)


# --- dates and times ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", [
    "April 4", "2026-04-04", "4 April 2026", "Apr 4th", "April 4, 2026", "4/4/2026", "Saturday, April 4",
    "It arrives on the 4th of April.", "Expected 2026-04-04T10:00", "04/04",
])
def test_date_paraphrases_pass(answer: str) -> None:
    assert verdict(answer, DateAnswer(value=APRIL_4))


@pytest.mark.parametrize("answer", ["April 5", "April 4 or April 5", "April 4, 2025", "tomorrow", "4/5/2026"])
def test_wrong_or_hedged_dates_fail(answer: str) -> None:
    assert not verdict(answer, DateAnswer(value=APRIL_4))


def test_date_details_and_allow() -> None:
    assert detail("April 4 or April 5", DateAnswer(value=APRIL_4)) == (
        "expected 2026-04-04; the answer states 2026-04-04, 2026-04-05")
    assert detail("soon", DateAnswer(value=APRIL_4)) == "expected 2026-04-04; found no date"
    assert verdict("Shipped April 1, arrives April 4", DateAnswer(value=APRIL_4, allow=[datetime.date(2026, 4, 1)]))
    ordered = AnswerContext(instruction="I ordered on April 1. When does it arrive?")
    assert verdict("Ordered April 1, arrives April 4", DateAnswer(value=APRIL_4), ctx=ordered)


def test_dates_supply_no_numbers() -> None:
    assert verdict("3 parcels, due April 4", Count(value=3))
    assert verdict("3 parcels, due April 4", Count(value=3), DateAnswer(value=APRIL_4))


@pytest.mark.parametrize("answer", ["11 am", "11:00", "11am", "11:00 AM", "at 11 a.m.", "11:00:00"])
def test_time_paraphrases_pass(answer: str) -> None:
    assert verdict(answer, TimeAnswer(start="11:00"))


@pytest.mark.parametrize("answer", ["11:00 or 14:00", "11 pm", "2 pm", "at 11", "11:30"])
def test_wrong_or_hedged_times_fail(answer: str) -> None:
    assert not verdict(answer, TimeAnswer(start="11:00"))


@pytest.mark.parametrize("answer", ["1-2 pm", "13:00-14:00", "13:00\u201314:00", "from 1 pm to 2 pm",
                                    "between 1 and 2 pm", "1pm to 2pm"])
def test_time_ranges(answer: str) -> None:
    assert verdict(answer, TimeAnswer(start="13:00", end="14:00"))


def test_time_range_details() -> None:
    slot = TimeAnswer(start="13:00", end="14:00")
    assert detail("1 pm", slot) == "expected 13:00-14:00; the answer states 13:00"
    assert not verdict("1-2 pm or 3-4 pm", slot)
    assert verdict("11-1 pm", TimeAnswer(start="11:00", end="13:00"))
    assert verdict("noon", TimeAnswer(start="12:00"))


def test_times_supply_no_numbers() -> None:
    assert verdict("2 rooms free at 11:00", Count(value=2))
    assert verdict("2 rooms free from 1-3 pm", Count(value=2))


def test_time_strings_are_validated() -> None:
    assert TimeAnswer(start="9:05").start == "09:05"
    with pytest.raises(ValidationError):
        TimeAnswer(start="25:00")


# --- yes/no ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer, value", [
    ("No, it's delayed.", False), ("Yes, it is on time", True), ("It is not on time", False),
    ("It isn't on time.", False), ("Yep.", True), ("Correct, it leaves at 11.", True), ("That's not correct", False),
    ("Nope, still delayed", False), ("It is, departing at 11:00", True),
])
def test_yes_no(answer: str, value: bool) -> None:
    assert verdict(answer, YesNo(value=value))
    assert not verdict(answer, YesNo(value=not value))


@pytest.mark.parametrize("answer", ["The flight is delayed", "Yes it isn't", "Yes and no", "maybe"])
def test_yes_no_unclear_fails_both_ways(answer: str) -> None:
    assert not verdict(answer, YesNo(value=True))
    assert not verdict(answer, YesNo(value=False))
    assert detail(answer, YesNo(value=True)).startswith("no clear yes or no")


def test_yes_no_reads_the_first_clause_only() -> None:
    assert verdict("No, but it is only 10 minutes late", YesNo(value=False))


# --- entities ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["It is delayed.", "Delayed", "It's delayed, not on time.",
                                    "It is delayed and not cancelled"])
def test_entity_named(answer: str) -> None:
    assert verdict(answer, STATUS)


@pytest.mark.parametrize("answer, why", [
    ("it is not delayed", "'delayed' is negated"),
    ("It hasn't been delayed", "'delayed' is negated"),
    ("It is on time", "does not name delayed; names wrong candidates: on time"),
    ("The status is unknown", "does not name delayed"),
    ("delayed, on time, scheduled, cancelled", "names wrong candidates: on time, scheduled, cancelled"),
    ("delayed or on time", "names wrong candidates: on time"),
])
def test_entity_exploits_fail(answer: str, why: str) -> None:
    assert detail(answer, STATUS) == why


def test_negated_ok_counts_a_negated_mention() -> None:
    blocker = Entities(expected=[["WEB-3"]], negated_ok=True)
    assert verdict("You can't close it while WEB-3 is open", blocker)
    assert verdict("It is not WEB-3's fault", blocker)
    assert not verdict("It is not WEB-3's fault", entity("WEB-3"))


def test_entity_matching_respects_boundaries() -> None:
    assert not verdict("E031", entity("E03"))
    assert verdict("e03", entity("E03"))
    assert verdict("Book the Cedar room", entity("Cedar", among=["Oak"]))
    assert not verdict("WEB-30", entity("WEB-3"))
    assert not verdict("8 business", entity("8 business seats"))


def test_longer_candidates_win_overlaps() -> None:
    beta = entity("Beta 1", among=["Beta 2", "Beta 10"])
    assert verdict("Beta 1", beta)
    assert detail("Beta 10", beta) == "does not name Beta 1; names wrong candidates: Beta 10"
    assert verdict("Milestone Beta 1, not Beta 10", beta)


def test_several_entities_by_alias() -> None:
    team = Entities(expected=[["Lucas", "Lucas Brown", "P03"], ["Grace"]], among=["Emma", "Noah"])
    assert verdict("Lucas Brown and Grace", team)
    assert verdict("P03 (Grace too)", team)
    assert detail("Lucas", team) == "does not name Grace"
    assert detail("Lucas, Grace and Emma", team) == "names wrong candidates: Emma"
    assert verdict("Lucas and Grace, not Emma or Noah", team)


def test_among_resolves_a_column() -> None:
    ctx = AnswerContext(resolve=lambda ref: {"user.name": ["Lucas Brown", "Emma", "Grace"]}[ref])
    person = Entities(expected=[["Lucas", "Lucas Brown", "P03"]], among="user.name")
    assert verdict("Lucas", person, ctx=ctx)
    assert detail("Lucas or Emma", person, ctx=ctx) == "names wrong candidates: Emma"
    assert not verdict("Lucas, Emma, Grace", person, ctx=ctx)
    assert detail("Lucas", person).startswith("cannot resolve 'user.name'")


def test_instruction_entities_are_echoes_only_for_database_candidates() -> None:
    ctx = AnswerContext(instruction="Emma is swamped; who else on the team can take WEB-3?",
                        resolve=lambda ref: ["Lucas", "Emma", "Grace"])
    person = entity("Lucas", among="user.name")
    assert verdict("Lucas can take it instead of Emma", person, ctx=ctx)
    assert not verdict("Lucas or Grace", person, ctx=ctx)
    # An explicit `among` is the author's list of wrong picks: echoing the question's options is hedging.
    hedge = AnswerContext(instruction="Is the Cedar room or the Oak room free at 3?")
    room = entity("Cedar", among=["Oak"])
    assert verdict("The Cedar room is free.", room, ctx=hedge)
    assert detail("Cedar or Oak", room, ctx=hedge) == "names wrong candidates: Oak"


# --- the length check and empty answers --------------------------------------------------------------------------


def test_length_cap() -> None:
    ok, long = check_answer("8", [Count(value=8)], CTX), check_answer("8 " + "x" * 500, [Count(value=8)], CTX)
    assert ok[-1].name == "answer at most 400 characters" and ok[-1].passed
    assert not long[-1].passed and long[-1].detail == "502 characters; the cap is 400"
    assert long[0].passed
    assert not check_answer("8" * 11, [], AnswerContext(max_chars=10))[-1].passed


@pytest.mark.parametrize("answer", [None, "", "   "])
def test_empty_answer_fails_every_part(answer: str | None) -> None:
    checks = check_answer(answer, [Count(value=8), YesNo(value=True), STATUS], CTX)
    assert len(checks) == 4 and not any(checks)
    assert all(c.detail == "no answer" for c in checks)


def test_one_check_per_part_with_names() -> None:
    names = [c.name for c in check_answer("x", [Count(value=8, label="free seats"), YesNo(value=False), STATUS,
                                                DateAnswer(value=APRIL_4), TimeAnswer(start="13:00", end="14:00")],
                                          CTX)]
    assert names == ["answer states free seats: 8", "answer says no", "answer names delayed",
                     "answer states 2026-04-04", "answer states 13:00-14:00", "answer at most 400 characters"]


# --- refusals ----------------------------------------------------------------------------------------------------

REASONS = ("basic fare", "basic", "24 hours", "insurance")
OTHERS = ("balance", "daily limit", "limit", "fare", "frozen")


def refusal(answer: str | None, ctx: AnswerContext = CTX) -> dict[str, bool]:
    return {c.name: c.passed for c in refusal_checks(answer, REASONS, OTHERS, ctx)}


def test_correct_refusal_passes() -> None:
    answer = ("I cannot cancel QX7P2K for a refund: it is a basic fare booked more than 24 hours ago "
              "without travel insurance.")
    assert refusal(answer) == {"answer refuses": True, "gives this task's reason": True, "cites no other rule": True,
                               "answer at most 400 characters": True}


@pytest.mark.parametrize("answer", ["I'm afraid I can't do that.", "Unfortunately that is not possible.",
                                    "Only maintainers can close issues, and that is a basic rule.",
                                    "You aren't eligible: basic fare.", "I must decline; basic fare."])
def test_refusal_phrases(answer: str) -> None:
    assert refusal(answer)["answer refuses"]


def test_generic_refusal_fails_the_reason() -> None:
    checks = refusal_checks("Sorry, I can't help with that.", REASONS, OTHERS, CTX)
    assert checks[0].passed and not checks[1].passed
    assert checks[1].detail == "mentions none of: basic fare, basic, 24 hours, insurance"


def test_keyword_stuffing_fails() -> None:
    checks = refusal_checks("I can't: basic fare, or your balance, or the daily limit, or a frozen account.",
                            REASONS, OTHERS, CTX)
    assert checks[1].passed and not checks[2].passed
    assert checks[2].detail == "cites balance, daily limit, frozen"


def test_other_cues_inside_reason_cues_are_ignored() -> None:
    # "fare" is part of the reason cue "basic fare"; "limit" would be too if it were a reason
    assert refusal("I can't cancel a basic fare booking.")["cites no other rule"]
    assert refusal("I can't: basic fare, and the fare rules say so.")["cites no other rule"]
    checks = refusal_checks("I can't: you hit the withdrawal limit", ["withdrawal limit"], ["limit"], CTX)
    assert all(checks)


def test_other_cues_from_the_instruction_are_echoes() -> None:
    ctx = AnswerContext(instruction="My balance is fine, just cancel my basic fare booking QX7P2K.")
    assert refusal("Your balance is fine, but I can't cancel a basic fare.", ctx)["cites no other rule"]
    assert not refusal("Your balance is fine, but I can't cancel a basic fare.")["cites no other rule"]


@pytest.mark.parametrize("answer", ["Done, I cancelled it because basic fare",
                                    "I've cancelled QX7P2K, even though basic fares normally cannot be refunded.",
                                    "Successfully refunded; basic fare rules can't stop that.",
                                    "Your booking is cancelled and refunded (basic fare)."])
def test_affirmative_answers_do_not_refuse(answer: str) -> None:
    assert not refusal(answer)["answer refuses"]


def test_affirmative_detail() -> None:
    assert refusal_checks("Done, I cancelled it because basic fare", REASONS, OTHERS, CTX)[0].detail == (
        "claims to have done it: 'Done'")


@pytest.mark.parametrize("answer", [None, "", "  "])
def test_empty_refusal_fails_everything(answer: str | None) -> None:
    checks = refusal_checks(answer, REASONS, OTHERS, CTX)
    assert len(checks) == 4 and not any(checks)


def test_refusal_length_cap() -> None:
    long = "I can't, basic fare. " + "Sorry. " * 80
    assert not refusal(long)["answer at most 400 characters"]


# --- specs on the wire -------------------------------------------------------------------------------------------


def test_parts_round_trip_through_json() -> None:
    parts: list[AnswerPart] = [
        Number(value=450, allow=[110, 340], label="total paid"), Count(value=8), DateAnswer(value=APRIL_4),
        TimeAnswer(start="13:00", end="14:00"), YesNo(value=False), entity("Lucas", "P03", among="user.name"),
        Entities(expected=[["WEB-4"], ["API-3"]], among=["WEB-1", "WEB-9"], negated_ok=True),
    ]
    adapter = TypeAdapter(list[AnswerPart])
    data = adapter.dump_json(parts)
    assert adapter.validate_json(data) == parts
    assert [type(p) for p in adapter.validate_python(adapter.dump_python(parts, mode="json"))] == [
        type(p) for p in parts]
    assert adapter.validate_python([{"type": "count", "value": 3}]) == [Count(value=3)]
    with pytest.raises(ValidationError):
        adapter.validate_python([{"type": "colour", "value": "red"}])


def test_entity_helper_and_validation() -> None:
    assert entity("Lucas", "P03", label="assignee") == Entities(expected=[["Lucas", "P03"]], label="assignee")
    assert entity("Lucas", among=("Emma",)).among == ["Emma"]
    with pytest.raises(ValidationError):
        Entities(expected=[[]])


def test_negative_number_words() -> None:
    assert verdict("minus three", Count(-3)) and verdict("It is -3.", Count(-3))
    assert not verdict("three", Count(-3)) and not verdict("minus three", Count(3))


def test_a_mention_denied_after_it_is_negated() -> None:
    blocker = entity("WEB-3", among=["WEB-1", "WEB-9"])
    assert not verdict("Nothing is blocking it: WEB-3 is not a blocker.", blocker)
    assert not verdict("WEB-3 isn't blocking it.", blocker)
    assert verdict("WEB-3 blocks it; WEB-1 isn't involved.", blocker)
    assert verdict("It is blocked by WEB-3, which is still in review.", blocker)
