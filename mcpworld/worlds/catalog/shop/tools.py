"""Online shop tools. Business rules live here, each with its own message."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from sqlmodel import select

from mcpworld.world import Session, ToolError, fetch, new_id, not_found, now, tool

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

Category = Literal["electronics", "apparel", "home"]
OrderStatus = Literal["cart", "placed", "shipped", "delivered", "cancelled"]
ShippingMethod = Literal["standard", "express"]
PayWith = Literal["card", "store_credit"]
CancelReason = Literal["changed_mind", "ordered_by_mistake", "found_cheaper", "other"]
ReturnReason = Literal["defective", "wrong_item", "changed_mind"]
RefundMethod = Literal["original_payment", "store_credit"]

RETURN_WINDOW = timedelta(days=30)
RESTOCKING_FEE = 0.15  # electronics returned because the customer changed their mind
SHIPPING_FEES = {"standard": 5.99, "express": 14.99}
FREE_STANDARD_SHIPPING_FROM = 50.0


def _get(db: Session, model: type, key: str, kind: str):
    """Ids are matched regardless of case and surrounding spaces."""
    return fetch(db, model, key.strip().upper(), kind)


def _items(db: Session, order_id: str) -> list[OrderItem]:
    return list(db.exec(select(OrderItem).where(OrderItem.order_id == order_id).order_by(OrderItem.id)))


def _cart(db: Session, customer_id: str) -> Order | None:
    return db.exec(select(Order).where(Order.customer_id == customer_id.strip().upper(),
                                       Order.status == "cart")).first()


def _code_problem(db: Session, code: DiscountCode, customer_id: str, subtotal: float) -> str | None:
    """Why `code` cannot be used by this customer on a cart of `subtotal` (None when it can)."""
    if not code.active:
        return f"discount code {code.code} is no longer active"
    if now(db) > code.expires_at:
        return f"discount code {code.code} expired on {code.expires_at:%Y-%m-%d}"
    if code.one_per_customer:
        used = db.exec(select(DiscountRedemption).where(DiscountRedemption.code == code.code,
                                                        DiscountRedemption.customer_id == customer_id)).first()
        if used is not None:
            return (f"discount code {code.code} can be used once per customer and was already used on order "
                    f"{used.order_id}")
    if subtotal < code.min_spend:
        return (f"discount code {code.code} needs a minimum spend of {code.min_spend:.2f}; "
                f"the cart subtotal is {subtotal:.2f}")
    return None


def _discount_for(code: DiscountCode, subtotal: float) -> float:
    if code.kind == "percent":
        return round(subtotal * code.value / 100, 2)
    return round(min(code.value, subtotal), 2)


def _reprice(db: Session, cart: Order) -> list[str]:
    """Recompute a cart's subtotal, discount and total; drop a code whose minimum spend is no longer met."""
    notes: list[str] = []
    cart.subtotal = round(sum(i.unit_price * i.quantity for i in _items(db, cart.id)), 2)
    cart.discount = 0.0
    if cart.discount_code:
        code = _get(db, DiscountCode, cart.discount_code, "discount code")
        if cart.subtotal < code.min_spend:
            notes.append(f"discount code {code.code} was removed: the subtotal {cart.subtotal:.2f} is below its "
                         f"minimum spend of {code.min_spend:.2f}")
            cart.discount_code = None
        else:
            cart.discount = _discount_for(code, cart.subtotal)
    cart.total = round(cart.subtotal - cart.discount, 2)
    return notes


def _cart_view(db: Session, cart: Order, notes: list[str] | None = None) -> dict:
    view = {"cart": cart.model_dump(), "items": [
        {**i.model_dump(), "name": db.get(Product, i.product_id).name} for i in _items(db, cart.id)
    ]}
    if notes:
        view["notes"] = notes
    return view


def _pay_refund(db: Session, order: Order, amount: float, method: str, reason: str,
                return_id: str | None = None) -> Refund:
    """Refund `amount` of `order`: to store credit, or back to how the order was paid."""
    if method == "store_credit" or (method == "original_payment" and order.payment == "store_credit"):
        customer = _get(db, Customer, order.customer_id, "customer")
        customer.store_credit = round(customer.store_credit + amount, 2)
        paid_to = "store_credit"
    else:
        paid_to = "card"
    refund = Refund(id=new_id(db, "RF"), order_id=order.id, return_id=return_id, amount=round(amount, 2),
                    method=paid_to, reason=reason, created_at=now(db))
    db.add(refund)
    return refund


@tool
def find_customer(db: Session, email: str) -> Customer:
    """Look up a customer by e-mail address: id, name, contact details, default address and store credit."""
    found = db.exec(select(Customer).where(Customer.email == email.strip().lower())).first()
    if found is None:
        raise not_found("customer with email", email)
    return found


@tool
def get_customer(db: Session, customer_id: str) -> Customer:
    """Get a customer's profile: name, contact details, default shipping address and store credit balance."""
    return _get(db, Customer, customer_id, "customer")


@tool
def search_products(db: Session, query: str = "", category: Category | None = None,
                    in_stock_only: bool = False) -> list[Product]:
    """Search the catalogue by words in the product name and/or category, cheapest first.

    Discontinued products are not listed. Each product shows price, stock, the most units one order may
    hold, and whether it is final sale (final-sale items cannot be returned).
    """
    stmt = select(Product).where(Product.active == True)  # noqa: E712
    if category is not None:
        stmt = stmt.where(Product.category == category)
    if in_stock_only:
        stmt = stmt.where(Product.stock > 0)
    products = db.exec(stmt.order_by(Product.price)).all()
    words = query.lower().split()
    return [p for p in products if all(w in p.name.lower() for w in words)]


@tool
def get_product(db: Session, product_id: str) -> Product:
    """Get one product by id (SKU): price, stock, per-order limit, final-sale and active flags."""
    return _get(db, Product, product_id, "product")


@tool
def list_orders(db: Session, customer_id: str, status: OrderStatus | None = None) -> list[Order]:
    """List a customer's orders (and open cart, status 'cart'), newest first, optionally by status."""
    customer_id = _get(db, Customer, customer_id, "customer").id
    stmt = select(Order).where(Order.customer_id == customer_id)
    if status is not None:
        stmt = stmt.where(Order.status == status)
    return list(db.exec(stmt.order_by(Order.created_at.desc())))


@tool
def get_order(db: Session, order_id: str) -> dict:
    """Get an order with its items (list and paid unit prices, quantities returned), its shipment and
    tracking, and any returns and refunds. The return window closes 30 days after delivery."""
    order = _get(db, Order, order_id, "order")
    shipment = db.exec(select(Shipment).where(Shipment.order_id == order.id)).first()
    view: dict = {
        "order": order.model_dump(),
        "items": [{**i.model_dump(), "name": db.get(Product, i.product_id).name,
                   "final_sale": db.get(Product, i.product_id).final_sale} for i in _items(db, order.id)],
        "shipment": shipment.model_dump() if shipment else None,
        "returns": [r.model_dump() for r in db.exec(select(ReturnRequest).where(ReturnRequest.order_id == order.id))],
        "refunds": [r.model_dump() for r in db.exec(select(Refund).where(Refund.order_id == order.id))],
    }
    if shipment is not None and shipment.delivered_at is not None:
        view["return_window_ends"] = (shipment.delivered_at + RETURN_WINDOW).isoformat()
    return view


@tool
def check_discount_code(db: Session, code: str, customer_id: str) -> dict:
    """Check whether a discount code can be used on the customer's current cart, and what it would save.

    Codes are refused when inactive, expired, already used by this customer (one use per customer), or
    when the cart subtotal is below the code's minimum spend.
    """
    found = _get(db, DiscountCode, code, "discount code")
    customer_id = _get(db, Customer, customer_id, "customer").id
    cart = _cart(db, customer_id)
    subtotal = cart.subtotal if cart else 0.0
    problem = _code_problem(db, found, customer_id, subtotal)
    return {**found.model_dump(), "cart_subtotal": subtotal, "usable": problem is None, "problem": problem,
            "would_save": _discount_for(found, subtotal) if problem is None else 0.0}


@tool(writes=True, destructive=False)
def add_to_cart(db: Session, customer_id: str, product_id: str, quantity: int = 1) -> dict:
    """Add units of a product to the customer's cart (a cart is opened if there is none).

    Refused for discontinued products, when the cart would hold more units than are in stock, or more
    than the product's per-order limit.
    """
    if quantity < 1:
        raise ToolError("quantity must be at least 1")
    customer_id = _get(db, Customer, customer_id, "customer").id
    product = _get(db, Product, product_id, "product")
    if not product.active:
        raise ToolError(f"product {product.id} ({product.name}) is discontinued and cannot be ordered")
    cart = _cart(db, customer_id)
    if cart is None:
        cart = Order(id=new_id(db, "O"), customer_id=customer_id, status="cart", created_at=now(db))
        db.add(cart)
        db.flush()
    line = db.exec(select(OrderItem).where(OrderItem.order_id == cart.id,
                                           OrderItem.product_id == product.id)).first()
    total = quantity + (line.quantity if line else 0)
    if product.stock == 0:
        raise ToolError(f"product {product.id} ({product.name}) is out of stock")
    if total > product.stock:
        raise ToolError(f"only {product.stock} unit(s) of {product.id} ({product.name}) in stock; "
                        f"the cart would hold {total}")
    if total > product.max_per_order:
        raise ToolError(f"at most {product.max_per_order} unit(s) of {product.id} ({product.name}) per order; "
                        f"the cart would hold {total}")
    if line is None:
        db.add(OrderItem(id=new_id(db, "OI"), order_id=cart.id, product_id=product.id, quantity=quantity,
                         unit_price=product.price))
    else:
        line.quantity = total
    db.flush()
    notes = _reprice(db, cart)
    return _cart_view(db, cart, notes)


@tool(writes=True)
def remove_from_cart(db: Session, customer_id: str, product_id: str, quantity: int | None = None) -> dict:
    """Remove units of a product from the customer's cart (all of them when quantity is not given).

    A discount code whose minimum spend is no longer met is taken off the cart.
    """
    customer_id = _get(db, Customer, customer_id, "customer").id
    cart = _cart(db, customer_id)
    if cart is None:
        raise ToolError(f"customer {customer_id} has no open cart")
    line = db.exec(select(OrderItem).where(OrderItem.order_id == cart.id,
                                           OrderItem.product_id == product_id.strip().upper())).first()
    if line is None:
        raise ToolError(f"product {product_id} is not in the cart of customer {customer_id}")
    if quantity is not None and quantity < 1:
        raise ToolError("quantity must be at least 1")
    if quantity is None or quantity >= line.quantity:
        db.delete(line)
    else:
        line.quantity -= quantity
    db.flush()
    notes = _reprice(db, cart)
    return _cart_view(db, cart, notes)


@tool(writes=True, destructive=False, idempotent=True)
def apply_discount(db: Session, customer_id: str, code: str) -> dict:
    """Apply a discount code to the customer's cart (replacing any code already on it).

    Percent codes take that share off the subtotal; fixed codes take their amount off. Refused when the
    code is inactive or expired, when the customer already used it (one use per customer), or when the
    cart subtotal is below the code's minimum spend.
    """
    found = _get(db, DiscountCode, code, "discount code")
    customer_id = _get(db, Customer, customer_id, "customer").id
    cart = _cart(db, customer_id)
    if cart is None:
        raise ToolError(f"customer {customer_id} has no open cart to apply a code to")
    problem = _code_problem(db, found, customer_id, cart.subtotal)
    if problem:
        raise ToolError(problem)
    cart.discount_code = found.code
    _reprice(db, cart)
    return _cart_view(db, cart)


@tool(writes=True, destructive=False)
def checkout(db: Session, customer_id: str, shipping_method: ShippingMethod = "standard",
             pay_with: PayWith = "card", shipping_address: str | None = None) -> dict:
    """Place the customer's cart as an order: stock is taken and the customer is charged.

    Standard shipping costs 5.99, free when the subtotal after discount is 50.00 or more; express costs
    14.99 always. Paying with store credit needs enough credit for the whole total. The address defaults to
    the customer's own. Refused when the cart is empty, an item is discontinued or short of stock, or the
    discount code is no longer valid.
    """
    customer = _get(db, Customer, customer_id, "customer")
    customer_id = customer.id
    cart = _cart(db, customer_id)
    items = _items(db, cart.id) if cart else []
    if cart is None or not items:
        raise ToolError(f"customer {customer_id} has no items in the cart")
    for item in items:
        product = _get(db, Product, item.product_id, "product")
        if not product.active:
            raise ToolError(f"product {product.id} ({product.name}) is discontinued; remove it from the cart")
        if item.quantity > product.stock:
            raise ToolError(f"only {product.stock} unit(s) of {product.id} ({product.name}) in stock")
        product.stock -= item.quantity
    _reprice(db, cart)
    if cart.discount_code:
        code = _get(db, DiscountCode, cart.discount_code, "discount code")
        problem = _code_problem(db, code, customer_id, cart.subtotal)
        if problem:
            raise ToolError(problem)
        db.add(DiscountRedemption(id=new_id(db, "RD"), code=code.code, customer_id=customer_id, order_id=cart.id,
                                  redeemed_at=now(db)))
    after_discount = round(cart.subtotal - cart.discount, 2)
    fee = SHIPPING_FEES[shipping_method]
    if shipping_method == "standard" and after_discount >= FREE_STANDARD_SHIPPING_FROM:
        fee = 0.0
    rate = cart.discount / cart.subtotal if cart.subtotal else 0.0
    for item in items:
        item.paid_price = round(item.unit_price * (1 - rate), 2)
    cart.shipping_method = shipping_method
    cart.shipping_fee = fee
    cart.total = round(after_discount + fee, 2)
    if pay_with == "store_credit":
        if customer.store_credit < cart.total:
            raise ToolError(f"store credit is {customer.store_credit:.2f}; the order total is {cart.total:.2f}")
        customer.store_credit = round(customer.store_credit - cart.total, 2)
    cart.payment = pay_with
    address = (shipping_address or customer.address).strip()
    if not address:
        raise ToolError("a shipping address is needed")
    cart.shipping_address = address
    cart.status = "placed"
    cart.placed_at = now(db)
    return {"order": cart.model_dump(), "items": [i.model_dump() for i in items]}


@tool(writes=True)
def cancel_order(db: Session, order_id: str, reason: CancelReason) -> dict:
    """Cancel a placed order that has not shipped yet: stock goes back and the total is refunded the way
    it was paid. A discount code used on it stays used.

    Refused once the order has shipped or been delivered (start a return instead), or if already cancelled.
    """
    order = _get(db, Order, order_id, "order")
    if order.status in ("shipped", "delivered"):
        raise ToolError(f"order {order.id} has already {order.status} and cannot be cancelled; "
                        "it can be returned after delivery instead")
    if order.status == "cancelled":
        raise ToolError(f"order {order.id} is already cancelled")
    if order.status == "cart":
        raise ToolError(f"{order.id} is an open cart, not a placed order; remove items from the cart instead")
    for item in _items(db, order.id):
        _get(db, Product, item.product_id, "product").stock += item.quantity
    order.status = "cancelled"
    refund = _pay_refund(db, order, order.total, "original_payment", f"cancelled: {reason}")
    return {"order": order.model_dump(), "refund": refund.model_dump()}


@tool(writes=True, destructive=False, idempotent=True)
def update_shipping_address(db: Session, order_id: str, address: str) -> Order:
    """Change where a placed order ships. Refused once the order has shipped, been delivered or cancelled."""
    order = _get(db, Order, order_id, "order")
    if order.status not in ("placed", "cart"):
        raise ToolError(f"order {order.id} is {order.status}: its shipping address can no longer change")
    address = address.strip()
    if len(address) < 8:
        raise ToolError(f"{address!r} is not a full shipping address")
    order.shipping_address = address
    return order


@tool(writes=True, destructive=False)
def request_return(db: Session, order_id: str, product_id: str, quantity: int, reason: ReturnReason) -> ReturnRequest:
    """Open an approved return for units of a delivered order's item, and work out its refund amount.

    The refund is the paid unit price (after the order's discount) times the quantity; electronics returned
    because the customer changed their mind lose a 15% restocking fee. Refused when the order is not
    delivered, more than 30 days have passed since delivery, the item is final sale, or more units are asked
    for than were bought and not already returned. Issue the money with refund_return.
    """
    if quantity < 1:
        raise ToolError("quantity must be at least 1")
    order = _get(db, Order, order_id, "order")
    if order.status != "delivered":
        raise ToolError(f"order {order.id} is {order.status}: only delivered orders can be returned")
    item = db.exec(select(OrderItem).where(OrderItem.order_id == order.id,
                                           OrderItem.product_id == product_id.strip().upper())).first()
    if item is None:
        raise ToolError(f"product {product_id} is not part of order {order.id}")
    product = _get(db, Product, item.product_id, "product")
    if product.final_sale:
        raise ToolError(f"{product.name} ({product.id}) was a final-sale item: final-sale items cannot be returned")
    shipment = db.exec(select(Shipment).where(Shipment.order_id == order.id)).first()
    if shipment is None or shipment.delivered_at is None:
        raise ToolError(f"order {order.id} has no recorded delivery")
    deadline = shipment.delivered_at + RETURN_WINDOW
    if now(db) > deadline:
        raise ToolError(f"order {order.id} was delivered on {shipment.delivered_at:%Y-%m-%d}: the 30-day return "
                        f"window closed on {deadline:%Y-%m-%d}")
    left = item.quantity - item.returned_qty
    if quantity > left:
        raise ToolError(f"only {left} unit(s) of {product.id} on order {order.id} can still be returned")
    amount = item.paid_price * quantity
    if product.category == "electronics" and reason == "changed_mind":
        amount *= 1 - RESTOCKING_FEE
    item.returned_qty += quantity
    # numbered per order (RT<order number>-<n>) rather than drawn from the episode's generator, so a
    # follow-up refund_return in a reference solution names the same id whatever the episode seed
    count = len(db.exec(select(ReturnRequest).where(ReturnRequest.order_id == order.id)).all())
    ret = ReturnRequest(id=f"RT{order.id.removeprefix('O')}-{count + 1}", order_id=order.id, order_item_id=item.id,
                        product_id=product.id, quantity=quantity, reason=reason, refund_amount=round(amount, 2),
                        created_at=now(db))
    db.add(ret)
    db.flush()
    return ret


@tool(writes=True)
def refund_return(db: Session, return_id: str, method: RefundMethod = "original_payment") -> dict:
    """Refund an approved return, to the original payment or as store credit, and restock the units
    (defective units are not restocked). Refused when the return was already refunded."""
    ret = _get(db, ReturnRequest, return_id, "return")
    if ret.status == "refunded":
        raise ToolError(f"return {ret.id} was already refunded")
    order = _get(db, Order, ret.order_id, "order")
    if ret.reason != "defective":
        _get(db, Product, ret.product_id, "product").stock += ret.quantity
    ret.status = "refunded"
    refund = _pay_refund(db, order, ret.refund_amount, method, f"return {ret.id} ({ret.reason})", return_id=ret.id)
    return {"return": ret.model_dump(), "refund": refund.model_dump()}


TOOLS = [find_customer, get_customer, search_products, get_product, list_orders, get_order, check_discount_code,
         add_to_cart, remove_from_cart, apply_discount, checkout, cancel_order, update_shipping_address,
         request_return, refund_return]
