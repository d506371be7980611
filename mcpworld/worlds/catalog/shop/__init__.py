"""Online shop: carts, checkout, discount codes, cancellations, returns and refunds, with store rules to respect."""

from mcpworld.world import World

from .data import NOW, seed
from .models import Base
from .policy import RULES
from .tasks import TASKS
from .tools import TOOLS

world = World(
    name="shop",
    title="Online shop",
    description="An online shop's desk: carts, discount codes, cancellations, returns and refunds.",
    scenario="You are the customer service agent of an online shop. Customers ask about products and orders, "
             "want items bought, codes applied, orders cancelled or re-addressed, and purchases returned and "
             "refunded. Follow the store's policy, including the rules the tools do not enforce themselves; "
             "when a request breaks a rule, change nothing, refuse politely and say which rule it breaks.",
    base=Base,
    seed=seed,
    tools=TOOLS,
    tasks=TASKS,
    names=["customer.name"],
    codes=["shipment.tracking_number"],
    amounts=["customer.store_credit", "product.price", "orders.subtotal", "orders.discount", "orders.shipping_fee",
             "orders.total", "order_item.unit_price", "order_item.paid_price", "discount_code.min_spend",
             "return_request.refund_amount", "refund.amount"],  # not discount_code.value: a percent stays one
    vary=True,
    rules=RULES,
    tags=["retail", "e-commerce", "returns", "refunds"],
    clock=NOW,
)
