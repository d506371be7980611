"""Online shop tasks. Every task fails a no-op episode and passes with its reference solution."""

from __future__ import annotations

from datetime import date

from mcpworld.world import DateAnswer, Number, Task, call, entity

TASKS = [
    # -- answers ---------------------------------------------------------------------------------------
    Task(
        id="track-shipped-order",
        kind="answer",
        instruction="Jonas Berg here. Where is my order O1003? Tell me the carrier and the tracking number.",
        solution=[call("get_order", order_id="O1003")],
        answer="Order O1003 has shipped and is in transit with FedEx, tracking number 784512390017.",
        expect=[entity("FedEx", among="shipment.carrier"),
                entity("784512390017", among="shipment.tracking_number")],
    ),
    Task(
        id="cheapest-electronics",
        kind="answer",
        instruction="What is the cheapest electronics product you have in stock right now, and what does it cost?",
        solution=[call("search_products", category="electronics", in_stock_only=True)],
        answer="The cheapest electronics product in stock is the USB-C Charger 65W (P108) at 34.99.",
        # 65 is part of the product's name ("65W", "65 W")
        expect=[entity("USB-C Charger 65W", "USB-C Charger", "USB-C charger", "P108", among="product.name"),
                Number(value=34.99, scales=True, allow=[65.0])],
    ),
    Task(
        id="return-deadline",
        kind="answer",
        instruction="I'm tom@example.com. Until what date can I still return the Bluetooth speaker I bought?",
        solution=[call("find_customer", email="tom@example.com"),
                  call("list_orders", customer_id="CU04"),
                  call("get_order", order_id="O1005")],
        answer="Your Pulse Bluetooth Speaker from order O1005 was delivered on 2026-03-05, so you can return it "
               "until 2026-04-04.",
        # the delivery date is the natural thing to give with the deadline
        expect=[DateAnswer(value=date(2026, 4, 4), allow=[date(2026, 3, 5)])],
        split="test",
        difficulty="medium",
    ),
    Task(
        id="order-total-and-discount",
        kind="answer",
        instruction="Maya Patel here. How much did I pay for order O1002, and how much did my discount code "
                    "save me on it?",
        solution=[call("get_order", order_id="O1002")],
        answer="Order O1002 came to 63.70 in total; the WELCOME15 code saved you 11.24.",
        # the subtotal before the discount, and the code's 15%, may be stated along the way
        expect=[Number(value=63.70, scales=True, label="total paid", allow=[74.94, 15.0]),
                Number(value=11.24, scales=True, label="discount", allow=[74.94, 15.0])],
    ),
    Task(
        id="code-savings-on-cart",
        kind="answer",
        instruction="I'm maya@example.com. Don't change anything yet: how much would the code SPRING10 save me "
                    "on what's in my cart right now?",
        solution=[call("find_customer", email="maya@example.com"),
                  call("check_discount_code", code="SPRING10", customer_id="CU01")],
        answer="SPRING10 takes 10% off your 89.00 cart, so it would save you 8.90.",
        expect=[Number(value=8.90, scales=True, allow=[10.0, 89.0])],
        difficulty="medium",
    ),
    # -- state changes ---------------------------------------------------------------------------------
    Task(
        id="cancel-unshipped-order",
        instruction="Maya Patel here. Please cancel my order O1002, I ordered it by mistake.",
        solution=[call("get_order", order_id="O1002"),
                  call("cancel_order", order_id="O1002", reason="ordered_by_mistake")],
        verify=lambda o: [o.diff.updated("orders", "O1002", status="cancelled"),
                          o.diff.inserted("refund", 1, order_id="O1002", amount=63.7, method="card"),
                          o.diff.updated("product", "P106", stock=16),
                          o.diff.updated("product", "P108", stock=21),
                          o.diff.only("orders", "product", "refund")],
    ),
    Task(
        id="return-headphones-changed-mind",
        instruction="Maya Patel (maya@example.com). I changed my mind about the Aurora Wireless Headphones from "
                    "order O1001. Please return them and refund my card.",
        solution=[call("get_order", order_id="O1001"),
                  call("request_return", order_id="O1001", product_id="P100", quantity=1, reason="changed_mind"),
                  call("refund_return", return_id="RT1001-1", method="original_payment")],
        verify=lambda o: [o.diff.inserted("return_request", 1, order_id="O1001", product_id="P100", quantity=1,
                                          reason="changed_mind", refund_amount=110.49, status="refunded"),
                          o.diff.inserted("refund", 1, order_id="O1001", amount=110.49, method="card"),
                          o.diff.updated("order_item", "I1001-1", returned_qty=1),
                          o.diff.updated("product", "P100", stock=13),
                          o.diff.unchanged("customer")],
        difficulty="medium",
    ),
    Task(
        id="return-defective-speaker-credit",
        instruction="tom@example.com here. The Pulse Bluetooth Speaker I received is defective. I want to return "
                    "it and get store credit instead of a card refund.",
        solution=[call("find_customer", email="tom@example.com"),
                  call("list_orders", customer_id="CU04", status="delivered"),
                  call("get_order", order_id="O1005"),
                  call("request_return", order_id="O1005", product_id="P101", quantity=1, reason="defective"),
                  call("refund_return", return_id="RT1005-1", method="store_credit")],
        verify=lambda o: [o.diff.inserted("return_request", 1, order_id="O1005", product_id="P101",
                                          reason="defective", refund_amount=59.5, status="refunded"),
                          o.diff.inserted("refund", 1, order_id="O1005", amount=59.5, method="store_credit"),
                          o.diff.updated("customer", "CU04", store_credit=59.5),
                          o.diff.unchanged("product")],
        difficulty="medium",
    ),
    Task(
        id="return-second-skillet",
        instruction="Hana Sato (hana@example.com). The second cast iron skillet from my February order turned "
                    "out to be the wrong item. Return it and put the money on my store credit.",
        solution=[call("find_customer", email="hana@example.com"),
                  call("list_orders", customer_id="CU05"),
                  call("get_order", order_id="O1006"),
                  call("request_return", order_id="O1006", product_id="P106", quantity=1, reason="wrong_item"),
                  call("refund_return", return_id="RT1006-2", method="store_credit")],
        verify=lambda o: [o.diff.inserted("return_request", 1, order_id="O1006", product_id="P106", quantity=1,
                                          reason="wrong_item", refund_amount=39.95, status="refunded"),
                          o.diff.updated("order_item", "I1006-2", returned_qty=2),
                          o.diff.updated("customer", "CU05", store_credit=159.95),
                          o.diff.updated("product", "P106", stock=16),
                          o.diff.inserted("refund", 1, order_id="O1006", amount=39.95, method="store_credit")],
        difficulty="hard",
        split="test",
    ),
    Task(
        id="checkout-with-save20",
        instruction="Jonas Berg, jonas@example.com. Add one TrailLite Rain Jacket to my cart, apply the code "
                    "SAVE20 and check out with standard shipping, paid by card.",
        solution=[call("find_customer", email="jonas@example.com"),
                  call("search_products", query="TrailLite Rain Jacket"),
                  call("add_to_cart", customer_id="CU02", product_id="P102", quantity=1),
                  call("apply_discount", customer_id="CU02", code="SAVE20"),
                  call("checkout", customer_id="CU02", shipping_method="standard", pay_with="card")],
        verify=lambda o: [o.diff.updated("orders", "O1008", status="placed", subtotal=107.0, discount=20.0,
                                         discount_code="SAVE20", shipping_fee=0.0, total=87.0, payment="card"),
                          o.diff.updated("product", "P102", stock=6),
                          o.diff.updated("product", "P103", stock=39),
                          o.diff.inserted("discount_redemption", 1, code="SAVE20", customer_id="CU02",
                                          order_id="O1008"),
                          o.diff.unchanged("customer")],
        difficulty="hard",
    ),
    Task(
        id="express-order-with-welcome-code",
        instruction="Hi, I'm Ravi Kumar (ravi@example.com). I'd like to order one TrailLite Rain Jacket using my "
                    "WELCOME15 code, with express shipping, paid by card, to my usual address.",
        solution=[call("find_customer", email="ravi@example.com"),
                  call("search_products", query="rain jacket"),
                  call("add_to_cart", customer_id="CU06", product_id="P102", quantity=1),
                  call("apply_discount", customer_id="CU06", code="WELCOME15"),
                  call("checkout", customer_id="CU06", shipping_method="express", pay_with="card")],
        verify=lambda o: [o.diff.inserted("orders", 1, customer_id="CU06", status="placed", subtotal=89.0,
                                          discount=13.35, shipping_method="express", shipping_fee=14.99,
                                          total=90.64, discount_code="WELCOME15",
                                          shipping_address="301 Congress Ave, Austin, TX 78701"),
                          o.diff.inserted("order_item", 1, product_id="P102", quantity=1, paid_price=75.65),
                          o.diff.updated("product", "P102", stock=6),
                          o.diff.inserted("discount_redemption", 1, code="WELCOME15", customer_id="CU06")],
        difficulty="hard",
        split="test",
    ),
    Task(
        id="socks-with-store-credit",
        instruction="Hana Sato, hana@example.com. Buy me two packs of the Merino wool socks, standard shipping, "
                    "and pay with my store credit.",
        solution=[call("find_customer", email="hana@example.com"),
                  call("search_products", query="merino socks"),
                  call("add_to_cart", customer_id="CU05", product_id="P103", quantity=2),
                  call("checkout", customer_id="CU05", shipping_method="standard", pay_with="store_credit")],
        verify=lambda o: [o.diff.inserted("orders", 1, customer_id="CU05", status="placed", subtotal=36.0,
                                          shipping_fee=5.99, total=41.99, payment="store_credit"),
                          o.diff.updated("customer", "CU05", store_credit=78.01),
                          o.diff.updated("product", "P103", stock=38)],
        difficulty="medium",
    ),
    Task(
        id="change-shipping-address",
        instruction="Ravi Kumar here. Please ship my order O1007 to 55 Rainey St, Apt 9, Austin, TX 78701 instead.",
        solution=[call("get_order", order_id="O1007"),
                  call("update_shipping_address", order_id="O1007", address="55 Rainey St, Apt 9, Austin, TX 78701")],
        verify=lambda o: [o.diff.updated("orders", "O1007", shipping_address="55 Rainey St, Apt 9, Austin, TX 78701",
                                         status="placed"),
                          o.diff.only("orders")],
    ),
    Task(
        id="trim-cart-keep-code",
        instruction="Jonas Berg (jonas@example.com): put two Aurora Wireless Headphones in my cart and take the "
                    "socks out, then apply SPRING10. Don't check out yet.",
        solution=[call("find_customer", email="jonas@example.com"),
                  call("add_to_cart", customer_id="CU02", product_id="P100", quantity=2),
                  call("remove_from_cart", customer_id="CU02", product_id="P103"),
                  call("apply_discount", customer_id="CU02", code="SPRING10")],
        verify=lambda o: [o.diff.updated("orders", "O1008", status="cart", subtotal=259.98, discount=26.0,
                                         discount_code="SPRING10", total=233.98),
                          o.diff.deleted("order_item", "I1008-1"),
                          o.diff.inserted("order_item", 1, order_id="O1008", product_id="P100", quantity=2),
                          o.diff.unchanged("product", "discount_redemption")],
        difficulty="medium",
    ),
    # -- refusals --------------------------------------------------------------------------------------
    Task(
        id="refuse-cancel-shipped",
        kind="refusal",
        instruction="Jonas Berg here. Cancel my order O1003 and refund me, I don't want the jacket any more.",
        solution=[call("get_order", order_id="O1003"),
                  call("cancel_order", order_id="O1003", reason="changed_mind")],
        reason="cancel-before-shipping",
        answer="I cannot cancel order O1003: it has already shipped and is in transit with FedEx. Once it is "
               "delivered you can send it back as a return.",
    ),
    Task(
        id="refuse-return-final-sale",
        kind="refusal",
        instruction="tom@example.com: I want to return the Clearance Denim Jacket from my last order for a refund.",
        solution=[call("find_customer", email="tom@example.com"),
                  call("list_orders", customer_id="CU04"),
                  call("get_order", order_id="O1005"),
                  call("request_return", order_id="O1005", product_id="P104", quantity=1, reason="changed_mind")],
        reason="final-sale",
        answer="I cannot return the Clearance Denim Jacket: it was a final-sale item, and final-sale items "
               "cannot be returned.",
        difficulty="medium",
    ),
    Task(
        id="refuse-return-after-window",
        kind="refusal",
        instruction="Lucia Romero (lucia@example.com). I'd like to return the rain jacket from order O1004, "
                    "it doesn't fit.",
        solution=[call("get_order", order_id="O1004"),
                  call("request_return", order_id="O1004", product_id="P102", quantity=1, reason="changed_mind")],
        reason="return-window",
        answer="I'm unable to accept that return: order O1004 was delivered on 2026-01-20 and the 30-day return "
               "window closed on 2026-02-19.",
        split="test",
    ),
    Task(
        id="refuse-expired-code",
        kind="refusal",
        instruction="Jonas Berg (jonas@example.com): apply the code WINTER25 to my cart please.",
        solution=[call("find_customer", email="jonas@example.com"),
                  call("apply_discount", customer_id="CU02", code="WINTER25")],
        reason="code-valid",
        answer="I cannot apply WINTER25: that code expired on 2026-02-28.",
    ),
    Task(
        id="refuse-code-reuse",
        kind="refusal",
        instruction="maya@example.com here. Apply my WELCOME15 code to my cart. If it doesn't work, leave the cart "
                    "as it is.",
        solution=[call("find_customer", email="maya@example.com"),
                  call("check_discount_code", code="WELCOME15", customer_id="CU01"),
                  call("apply_discount", customer_id="CU01", code="WELCOME15")],
        reason="code-once-per-customer",
        answer="I cannot apply WELCOME15: it can be used once per customer and you already used it on order "
               "O1002. Your cart is unchanged.",
        difficulty="medium",
    ),
    Task(
        id="refuse-over-stock",
        kind="refusal",
        instruction="Jonas Berg (CU02). Add three Pulse Bluetooth Speakers to my cart. I need exactly three for "
                    "my shop, so don't add fewer.",
        solution=[call("search_products", query="pulse speaker"),
                  call("add_to_cart", customer_id="CU02", product_id="P101", quantity=3)],
        reason="stock",
        answer="I cannot add three Pulse Bluetooth Speakers: only 2 are in stock.",
        split="test",
        difficulty="medium",
    ),
    # -- policy-only refusals: the write would succeed, the policy forbids it --------------------------------
    Task(
        id="refuse-cancel-for-neighbour",
        kind="refusal",
        reason="own-orders-only",
        instruction="I'm Lucia Romero (lucia@example.com). My neighbour Ravi asked me to cancel his order O1007 "
                    "for him, he ordered it by mistake. Please cancel it.",
        solution=[call("find_customer", email="lucia@example.com"),
                  call("get_order", order_id="O1007")],
        answer="I cannot cancel order O1007 for you: it is not your order, so only the customer who placed it "
               "can ask for that.",
        difficulty="medium",
    ),
    Task(
        id="refuse-readdress-others-order",
        kind="refusal",
        reason="own-orders-only",
        instruction="Tom Okafor here (tom@example.com). Maya is sending me order O1002 as a gift: please change "
                    "its shipping address to 77 Lake Shore Dr, Chicago, IL 60611.",
        solution=[call("find_customer", email="tom@example.com"),
                  call("get_order", order_id="O1002")],
        answer="I'm unable to change the address of order O1002 at your request: it is not your order, and only "
               "its own customer can re-address it.",
        difficulty="medium",
        split="test",
    ),
    Task(
        id="refuse-ship-abroad",
        kind="refusal",
        reason="us-shipping-only",
        instruction="Ravi Kumar here. Please ship my order O1007 to 221B Baker Street, London NW1 6XE, United "
                    "Kingdom instead, I'll be in London next week.",
        solution=[call("get_order", order_id="O1007")],
        answer="I cannot send order O1007 to London: we only ship within the United States.",
    ),
]
