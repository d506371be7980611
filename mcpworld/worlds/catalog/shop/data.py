"""Seed data: a small, hand-made shop with rules worth testing (final sale, old deliveries, spent codes...)."""

from __future__ import annotations

from datetime import datetime

from mcpworld.world import Session

from .models import (
    Customer,
    DiscountCode,
    DiscountRedemption,
    Order,
    OrderItem,
    Product,
    Refund,
    ReturnRequest,
    Shipment,
)

NOW = datetime(2026, 3, 15, 10, 0, 0)


def _d(month: int, day: int, hour: int = 12, minute: int = 0) -> datetime:
    return datetime(2026, month, day, hour, minute)


def seed(db: Session) -> None:
    db.add_all([
        Customer(id="CU01", name="Maya Patel", email="maya@example.com", phone="+1 415 555 0131",
                 address="12 Alder St, Portland, OR 97205"),
        Customer(id="CU02", name="Jonas Berg", email="jonas@example.com", phone="+1 206 555 0142",
                 address="880 Pine Ave, Seattle, WA 98101", store_credit=25.0),
        Customer(id="CU03", name="Lucia Romero", email="lucia@example.com", phone="+1 305 555 0153",
                 address="4 Coral Way, Miami, FL 33145"),
        Customer(id="CU04", name="Tom Okafor", email="tom@example.com", phone="+1 312 555 0164",
                 address="77 Lake Shore Dr, Chicago, IL 60611"),
        Customer(id="CU05", name="Hana Sato", email="hana@example.com", phone="+1 617 555 0175",
                 address="9 Beacon St, Boston, MA 02108", store_credit=120.0),
        Customer(id="CU06", name="Ravi Kumar", email="ravi@example.com", phone="+1 512 555 0186",
                 address="301 Congress Ave, Austin, TX 78701"),
    ])
    db.add_all([
        Product(id="P100", name="Aurora Wireless Headphones", category="electronics", price=129.99, stock=12,
                max_per_order=3),
        Product(id="P101", name="Pulse Bluetooth Speaker", category="electronics", price=59.50, stock=2),
        Product(id="P102", name="TrailLite Rain Jacket", category="apparel", price=89.00, stock=7),
        Product(id="P103", name="Merino Wool Socks (3-pack)", category="apparel", price=18.00, stock=40),
        Product(id="P104", name="Clearance Denim Jacket", category="apparel", price=35.00, stock=3, final_sale=True),
        Product(id="P105", name="Ceramic Pour-Over Set", category="home", price=42.00, stock=0),
        Product(id="P106", name="Cast Iron Skillet 10in", category="home", price=39.95, stock=15),
        Product(id="P107", name="Limited Edition Print", category="home", price=25.00, stock=5, max_per_order=1,
                final_sale=True),
        Product(id="P108", name="USB-C Charger 65W", category="electronics", price=34.99, stock=20),
        Product(id="P109", name="Brass Desk Lamp", category="home", price=49.00, stock=4, active=False),
    ])
    db.add_all([
        DiscountCode(code="SPRING10", kind="percent", value=10, min_spend=50.0, expires_at=_d(4, 30, 23, 59)),
        DiscountCode(code="WELCOME15", kind="percent", value=15, expires_at=_d(12, 31, 23, 59)),
        DiscountCode(code="SAVE20", kind="fixed", value=20, min_spend=100.0, expires_at=_d(3, 31, 23, 59)),
        DiscountCode(code="WINTER25", kind="percent", value=25, expires_at=_d(2, 28, 23, 59)),
        DiscountCode(code="STAFF50", kind="percent", value=50, expires_at=_d(12, 31, 23, 59), active=False),
    ])
    db.add_all([
        # delivered 18 days ago: inside the 30-day return window
        Order(id="O1001", customer_id="CU01", status="delivered", created_at=_d(2, 20, 9), placed_at=_d(2, 20, 9),
              shipping_address="12 Alder St, Portland, OR 97205", subtotal=165.98, total=165.98),
        # placed yesterday with WELCOME15, not shipped yet: cancellable
        Order(id="O1002", customer_id="CU01", status="placed", created_at=_d(3, 14, 9), placed_at=_d(3, 14, 9, 30),
              shipping_address="12 Alder St, Portland, OR 97205", discount_code="WELCOME15", subtotal=74.94,
              discount=11.24, total=63.70),
        # on its way: too late to cancel
        Order(id="O1003", customer_id="CU02", status="shipped", created_at=_d(3, 11, 18), placed_at=_d(3, 11, 18),
              shipping_address="880 Pine Ave, Seattle, WA 98101", subtotal=89.0, total=89.0),
        # delivered 54 days ago: outside the return window
        Order(id="O1004", customer_id="CU03", status="delivered", created_at=_d(1, 12, 10), placed_at=_d(1, 12, 10),
              shipping_address="4 Coral Way, Miami, FL 33145", subtotal=89.0, total=89.0),
        # a final-sale jacket and a speaker, delivered 10 days ago
        Order(id="O1005", customer_id="CU04", status="delivered", created_at=_d(2, 28, 20), placed_at=_d(2, 28, 20),
              shipping_address="77 Lake Shore Dr, Chicago, IL 60611", subtotal=94.50, total=94.50),
        # two skillets, one already returned
        Order(id="O1006", customer_id="CU05", status="delivered", created_at=_d(2, 24, 11), placed_at=_d(2, 24, 11),
              shipping_address="9 Beacon St, Boston, MA 02108", subtotal=104.90, total=104.90),
        # placed this morning, express: the address may still change
        Order(id="O1007", customer_id="CU06", status="placed", created_at=_d(3, 15, 8), placed_at=_d(3, 15, 8),
              shipping_method="express", shipping_address="301 Congress Ave, Austin, TX 78701", subtotal=69.98,
              shipping_fee=14.99, total=84.97),
        # open carts
        Order(id="O1008", customer_id="CU02", status="cart", created_at=_d(3, 13, 21), subtotal=18.0, total=18.0),
        Order(id="O1009", customer_id="CU03", status="cancelled", created_at=_d(2, 2, 10), placed_at=_d(2, 2, 10),
              shipping_address="4 Coral Way, Miami, FL 33145", subtotal=42.0, total=42.0),
        Order(id="O1010", customer_id="CU01", status="cart", created_at=_d(3, 15, 9), subtotal=89.0, total=89.0),
    ])
    db.add_all([
        OrderItem(id="I1001-1", order_id="O1001", product_id="P100", quantity=1, unit_price=129.99, paid_price=129.99),
        OrderItem(id="I1001-2", order_id="O1001", product_id="P103", quantity=2, unit_price=18.0, paid_price=18.0),
        OrderItem(id="I1002-1", order_id="O1002", product_id="P106", quantity=1, unit_price=39.95, paid_price=33.96),
        OrderItem(id="I1002-2", order_id="O1002", product_id="P108", quantity=1, unit_price=34.99, paid_price=29.74),
        OrderItem(id="I1003-1", order_id="O1003", product_id="P102", quantity=1, unit_price=89.0, paid_price=89.0),
        OrderItem(id="I1004-1", order_id="O1004", product_id="P102", quantity=1, unit_price=89.0, paid_price=89.0),
        OrderItem(id="I1005-1", order_id="O1005", product_id="P104", quantity=1, unit_price=35.0, paid_price=35.0),
        OrderItem(id="I1005-2", order_id="O1005", product_id="P101", quantity=1, unit_price=59.5, paid_price=59.5),
        OrderItem(id="I1006-1", order_id="O1006", product_id="P107", quantity=1, unit_price=25.0, paid_price=25.0),
        OrderItem(id="I1006-2", order_id="O1006", product_id="P106", quantity=2, unit_price=39.95, paid_price=39.95,
                  returned_qty=1),
        OrderItem(id="I1007-1", order_id="O1007", product_id="P108", quantity=2, unit_price=34.99, paid_price=34.99),
        OrderItem(id="I1008-1", order_id="O1008", product_id="P103", quantity=1, unit_price=18.0),
        OrderItem(id="I1009-1", order_id="O1009", product_id="P105", quantity=1, unit_price=42.0, paid_price=42.0),
        OrderItem(id="I1010-1", order_id="O1010", product_id="P102", quantity=1, unit_price=89.0),
    ])
    db.add_all([
        Shipment(id="SH5001", order_id="O1001", carrier="UPS", tracking_number="1Z84A7W20381",
                 status="delivered", shipped_at=_d(2, 22, 8), delivered_at=_d(2, 25, 14, 10)),
        Shipment(id="SH5002", order_id="O1003", carrier="FedEx", tracking_number="784512390017",
                 status="in_transit", shipped_at=_d(3, 12, 16)),
        Shipment(id="SH5003", order_id="O1004", carrier="USPS", tracking_number="9400111899223344556677",
                 status="delivered", shipped_at=_d(1, 14, 9), delivered_at=_d(1, 20, 11, 45)),
        Shipment(id="SH5004", order_id="O1005", carrier="UPS", tracking_number="1Z84A7W20977",
                 status="delivered", shipped_at=_d(3, 2, 9), delivered_at=_d(3, 5, 15, 20)),
        Shipment(id="SH5005", order_id="O1006", carrier="FedEx", tracking_number="784512388842",
                 status="delivered", shipped_at=_d(2, 26, 9), delivered_at=_d(3, 1, 10, 5)),
    ])
    db.add_all([
        DiscountRedemption(id="RD0001", code="WELCOME15", customer_id="CU01", order_id="O1002",
                           redeemed_at=_d(3, 14, 9, 30)),
        ReturnRequest(id="RT1006-1", order_id="O1006", order_item_id="I1006-2", product_id="P106", quantity=1,
                      reason="defective", status="refunded", refund_amount=39.95, created_at=_d(3, 3, 10)),
    ])
    db.flush()
    db.add_all([
        Refund(id="RF0001", order_id="O1006", return_id="RT1006-1", amount=39.95, method="card",
               reason="return RT1006-1 (defective)", created_at=_d(3, 3, 10)),
        Refund(id="RF0002", order_id="O1009", amount=42.0, method="card", reason="cancelled: changed_mind",
               created_at=_d(2, 2, 15)),
    ])
