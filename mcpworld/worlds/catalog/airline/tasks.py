"""Airline desk tasks. Every task fails a no-op episode and passes with its reference solution."""

from __future__ import annotations

from mcpworld.world import Count, Number, Task, YesNo, call, entity

TASKS = [
    Task(
        id="cancel-within-24h",
        instruction="I'm Alan Turing. I booked reservation ZFA04Y an hour ago by mistake. Please cancel it and refund me.",
        solution=[call("get_reservation", reservation_id="ZFA04Y"),
                  call("cancel_reservation", reservation_id="ZFA04Y", reason="change_of_plan")],
        # "booked by mistake" is a change of plan, or plainly "other": both record the same refund
        alternatives=[[call("cancel_reservation", reservation_id="ZFA04Y", reason="other")]],
        verify=lambda o: [o.diff.updated("reservation", "ZFA04Y", status="cancelled"),
                          o.diff.inserted("refund", 1, reservation_id="ZFA04Y", amount=420.0,
                                          payment_id="PM-ALAN-CARD"),
                          o.diff.updated("flight", "MW101-0603", economy_sold=39)],
    ),
    Task(
        id="refuse-basic-cancel",
        kind="refusal",
        instruction="This is Katherine Johnson. Cancel my reservation QX7P2K and refund my card, I can't travel.",
        solution=[call("get_reservation", reservation_id="QX7P2K"),
                  call("cancel_reservation", reservation_id="QX7P2K", reason="change_of_plan")],
        reason="basic-cancel-24h",
        answer="I cannot cancel QX7P2K for a refund: it is a basic fare booked more than 24 hours ago "
               "without travel insurance.",
        difficulty="medium",
    ),
    Task(
        id="cancel-insured-basic",
        instruction="Edsger Dijkstra here. I have to cancel reservation INS9RT for medical reasons; I bought "
                    "insurance with it. Please refund it.",
        solution=[call("cancel_reservation", reservation_id="INS9RT", reason="medical")],
        verify=lambda o: [o.diff.updated("reservation", "INS9RT", status="cancelled"),
                          o.diff.inserted("refund", 1, amount=110.0, reason="medical")],
    ),
    Task(
        id="flight-status",
        kind="answer",
        instruction="Is flight MW307-0602 to San Francisco delayed?",
        solution=[call("get_flight", flight_id="MW307-0602")],
        answer="Yes, flight MW307-0602 is delayed.",
        # the status alone would pass a dump of the flight record; yes/no alone would pass "yes, it is on time".
        # Asked as "is it delayed?" (not "is it on time?") so that "It is delayed." reads as the yes it is.
        expect=[YesNo(value=True), entity("delayed", "running late", among="flight.status")],
    ),
    Task(
        id="business-seats-left",
        kind="answer",
        instruction="How many business-class seats are still free on flight MW101-0603?",
        solution=[call("get_flight", flight_id="MW101-0603")],
        answer="There are 8 business seats left on MW101-0603.",
        expect=[Count(value=8, scales=True)],
        split="test",
    ),
    Task(
        id="book-cheapest-economy",
        instruction="I'm alan@example.com. Book me the cheapest economy seat from LHR to JFK on 2026-06-03, "
                    "basic fare, no insurance, on my card.",
        solution=[call("find_customer", email="alan@example.com"),
                  call("search_flights", origin="LHR", destination="JFK", day="2026-06-03"),
                  call("list_payment_methods", customer_id="C003"),
                  call("book_flight", customer_id="C003", flight_id="MW103-0603", cabin="economy", fare="basic",
                       passengers=1, payment_id="PM-ALAN-CARD")],
        verify=lambda o: [o.diff.inserted("reservation", 1, customer_id="C003", flight_id="MW103-0603",
                                          cabin="economy", fare="basic", passengers=1, amount_paid=380.0),
                          o.diff.updated("flight", "MW103-0603", economy_sold=41),
                          o.diff.only("reservation", "flight")],
        difficulty="medium",
    ),
    Task(
        id="refuse-full-flight",
        kind="refusal",
        instruction="Grace Hopper (grace@example.com) here. Book me one economy seat, standard fare, on flight "
                    "MW105-0604 with my card.",
        solution=[call("find_customer", email="grace@example.com"),
                  call("get_flight", flight_id="MW105-0604")],
        reason="seats-available",
        answer="I cannot book MW105-0604: it is sold out, with no economy seats left.",
        difficulty="medium",
    ),
    Task(
        id="change-to-evening-flight",
        instruction="Ada Lovelace here. Please move my reservation STD5LM to the evening flight on the same day "
                    "and route, and refund any difference.",
        solution=[call("get_reservation", reservation_id="STD5LM"),
                  call("get_flight", flight_id="MW101-0603"),
                  call("search_flights", origin="LHR", destination="JFK", day="2026-06-03"),
                  call("change_flight", reservation_id="STD5LM", new_flight_id="MW103-0603")],
        verify=lambda o: [o.diff.updated("reservation", "STD5LM", flight_id="MW103-0603"),
                          o.diff.inserted("refund", 1, reservation_id="STD5LM", amount=46.0)],
        difficulty="hard",
    ),
    Task(
        id="refuse-basic-change",
        kind="refusal",
        instruction="Alan Turing here: move my reservation ZFA04Y to flight MW103-0603 please.",
        solution=[call("get_reservation", reservation_id="ZFA04Y"),
                  call("change_flight", reservation_id="ZFA04Y", new_flight_id="MW103-0603")],
        reason="basic-no-change",
        answer="I cannot change ZFA04Y: it is a basic fare, and basic fares cannot be moved to another flight.",
    ),
    Task(
        id="add-free-bags",
        instruction="I'm Ada Lovelace, add 2 checked bags to reservation STD5LM.",
        solution=[call("add_bags", reservation_id="STD5LM", bags=2)],
        verify=lambda o: [o.diff.updated("reservation", "STD5LM", bags=3), o.diff.unchanged("charge")],
    ),
    Task(
        id="add-paid-bag",
        instruction="Katherine Johnson: we need 3 checked bags in total on reservation QX7P2K (it has none yet).",
        solution=[call("get_reservation", reservation_id="QX7P2K"),
                  call("get_customer", customer_id="C004"),
                  call("add_bags", reservation_id="QX7P2K", bags=3)],
        verify=lambda o: [o.diff.updated("reservation", "QX7P2K", bags=3),
                          o.diff.inserted("charge", 1, reservation_id="QX7P2K", amount=35.0, payment_id="PM-KJ-CARD")],
        difficulty="medium",
    ),
    Task(
        id="upgrade-to-business",
        instruction="Edsger Dijkstra: upgrade my reservation DLY2CC to business class, charge my card.",
        solution=[call("get_reservation", reservation_id="DLY2CC"),
                  call("get_flight", flight_id="MW307-0602"),
                  call("upgrade_cabin", reservation_id="DLY2CC")],
        verify=lambda o: [o.diff.updated("reservation", "DLY2CC", cabin="business", amount_paid=1300.0),
                          o.diff.inserted("charge", 1, amount=960.0)],
        split="test",
    ),
    Task(
        id="cancelled-flight-refund-and-credit",
        instruction="Grace Hopper (grace@example.com). You cancelled my flight to San Francisco. Refund my "
                    "reservation on it in full and give me the maximum travel credit you can.",
        solution=[call("find_customer", email="grace@example.com"),
                  call("list_reservations", customer_id="C002"),
                  call("get_flight", flight_id="MW305-0602"),
                  call("cancel_reservation", reservation_id="CXL8BB", reason="flight_cancelled"),
                  call("issue_travel_credit", customer_id="C002", reservation_id="CXL8BB", amount=200.0)],
        verify=lambda o: [o.diff.updated("reservation", "CXL8BB", status="cancelled"),
                          o.diff.inserted("refund", 1, amount=320.0, reason="flight_cancelled"),
                          o.diff.updated("customer", "C002", travel_credit=250.0)],
        difficulty="hard",
    ),
    Task(
        id="refuse-compensation-on-time",
        kind="refusal",
        instruction="Ada Lovelace here (C001). I want travel credit as compensation for reservation STD5LM.",
        solution=[call("get_reservation", reservation_id="STD5LM"),
                  call("get_flight", flight_id="MW101-0603")],
        reason="compensation",
        answer="I cannot issue travel credit: flight MW101-0603 is on time, and compensation is only for "
               "delayed or cancelled flights.",
        split="test",
    ),
    Task(
        id="update-email",
        instruction="This is Grace Hopper, currently grace@example.com. Change my e-mail to grace.hopper@navy.mil.",
        solution=[call("find_customer", email="grace@example.com"),
                  call("update_contact", customer_id="C002", email="grace.hopper@navy.mil")],
        verify=lambda o: [o.diff.updated("customer", "C002", email="grace.hopper@navy.mil"), o.diff.only("customer")],
    ),
    Task(
        id="gift-card-balance",
        kind="answer",
        instruction="I'm ada@example.com. How much is left on my gift card?",
        solution=[call("find_customer", email="ada@example.com"),
                  call("list_payment_methods", customer_id="C001")],
        answer="Your gift card PM-ADA-GIFT has 150.00 left.",
        expect=[Number(value=150.0, scales=True)],
    ),
    Task(
        id="total-paid",
        kind="answer",
        instruction="edsger@example.com here. How much have I paid in total across all my reservations?",
        solution=[call("find_customer", email="edsger@example.com"),
                  call("list_reservations", customer_id="C005")],
        answer="You have paid 450.00 in total (110.00 for INS9RT and 340.00 for DLY2CC).",
        # the two reservations and their amounts may be given along with the total
        expect=[Number(value=450.0, scales=True, allow=[110.0, 340.0, 2.0])],
        difficulty="medium",
    ),
    Task(
        id="refuse-gift-card-short",
        kind="refusal",
        instruction="Katherine Johnson (kj@example.com): book one economy basic seat on MW203-0602 and pay it "
                    "with my gift card only.",
        solution=[call("find_customer", email="kj@example.com"),
                  call("list_payment_methods", customer_id="C004"),
                  call("get_flight", flight_id="MW203-0602")],
        reason="payment-gift-card",
        answer="I cannot pay that with your gift card alone: its balance is 40.00 and the seat costs 95.00.",
        difficulty="medium",
    ),
    Task(
        id="book-business-insured-pair",
        instruction="Edsger Dijkstra (edsger@example.com): book two business seats, standard fare, with travel "
                    "insurance, from LHR to CDG on 2026-06-06, on my card.",
        solution=[call("find_customer", email="edsger@example.com"),
                  call("search_flights", origin="LHR", destination="CDG", day="2026-06-06"),
                  call("list_payment_methods", customer_id="C005"),
                  call("book_flight", customer_id="C005", flight_id="MW401-0606", cabin="business",
                       fare="standard", passengers=2, payment_id="PM-ED-CARD", insurance=True)],
        verify=lambda o: [o.diff.inserted("reservation", 1, customer_id="C005", flight_id="MW401-0606",
                                          cabin="business", passengers=2, insurance=True, amount_paid=1026.0),
                          o.diff.updated("flight", "MW401-0606", business_sold=6)],
        difficulty="hard",
        split="test",
    ),
    Task(
        id="delay-compensation",
        instruction="edsger@example.com: my San Francisco flight is delayed. Give me the maximum travel credit "
                    "for it.",
        solution=[call("find_customer", email="edsger@example.com"),
                  call("list_reservations", customer_id="C005"),
                  call("get_flight", flight_id="MW307-0602"),
                  call("issue_travel_credit", customer_id="C005", reservation_id="DLY2CC", amount=100.0)],
        verify=lambda o: [o.diff.updated("customer", "C005", travel_credit=100.0),
                          o.diff.inserted("compensation", 1, reservation_id="DLY2CC", amount=100.0)],
        difficulty="hard",
    ),
    # -- policy-only refusals: the write would succeed, the policy forbids it --------------------------------
    Task(
        id="refuse-cancel-for-colleague",
        kind="refusal",
        reason="own-reservations-only",
        instruction="Alan Turing here (alan@example.com). My colleague Ada asked me to cancel her reservation "
                    "GIFT6D for her, please do it now and refund it.",
        solution=[call("find_customer", email="alan@example.com"),
                  call("get_reservation", reservation_id="GIFT6D")],
        answer="I cannot cancel GIFT6D for you: it is not your reservation, so only its own customer can ask "
               "for that.",
        difficulty="medium",
    ),
    Task(
        id="refuse-bags-on-others-booking",
        kind="refusal",
        reason="own-reservations-only",
        instruction="Katherine Johnson (kj@example.com). I'm travelling with Edsger, so add two checked bags to "
                    "his reservation DLY2CC for my luggage.",
        solution=[call("find_customer", email="kj@example.com"),
                  call("get_reservation", reservation_id="DLY2CC")],
        answer="I'm unable to add bags to DLY2CC at your request: it is not your reservation, and I can only "
               "change a booking for its own customer.",
        difficulty="medium",
        split="test",
    ),
    Task(
        id="refuse-six-passenger-booking",
        kind="refusal",
        reason="max-five-passengers",
        instruction="Edsger Dijkstra (edsger@example.com): book six economy seats, standard fare, no insurance, "
                    "on flight MW401-0606, all on one reservation and paid with my card.",
        solution=[call("find_customer", email="edsger@example.com"),
                  call("get_flight", flight_id="MW401-0606")],
        answer="I cannot book that: one reservation holds at most five passengers, so a party of six has to go "
               "through our group sales desk.",
        difficulty="medium",
    ),
]
