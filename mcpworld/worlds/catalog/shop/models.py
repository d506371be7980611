"""Online shop state: customers, products with stock, carts and orders, shipments, returns, refunds, codes."""

from __future__ import annotations

from sqlmodel import Field

from mcpworld.world import Timestamp, world_base

Base = world_base()


class Customer(Base, table=True):
    id: str = Field(primary_key=True)
    name: str
    email: str = Field(unique=True)
    phone: str
    address: str  # default shipping address
    store_credit: float = 0.0


class Product(Base, table=True):
    id: str = Field(primary_key=True)  # SKU, e.g. P100
    name: str
    category: str  # electronics | apparel | home
    price: float
    stock: int = Field(ge=0)
    max_per_order: int = 10
    final_sale: bool = False  # final-sale items cannot be returned
    active: bool = True  # discontinued products cannot be bought


class Order(Base, table=True):
    __tablename__ = "orders"
    id: str = Field(primary_key=True)
    customer_id: str = Field(foreign_key="customer.id")
    status: str = "cart"  # cart | placed | shipped | delivered | cancelled
    created_at: Timestamp
    placed_at: Timestamp | None = None
    shipping_method: str = "standard"  # standard | express
    shipping_address: str = ""
    discount_code: str | None = Field(default=None, foreign_key="discount_code.code")
    subtotal: float = 0.0
    discount: float = 0.0
    shipping_fee: float = 0.0
    total: float = 0.0
    payment: str = "card"  # card | store_credit


class OrderItem(Base, table=True):
    __tablename__ = "order_item"
    id: str = Field(primary_key=True)
    order_id: str = Field(foreign_key="orders.id")
    product_id: str = Field(foreign_key="product.id")
    quantity: int = Field(ge=1)
    unit_price: float  # list price when added to the cart
    paid_price: float = 0.0  # per unit, after the order's discount (set at checkout); what a return refunds
    returned_qty: int = 0


class Shipment(Base, table=True):
    id: str = Field(primary_key=True)
    order_id: str = Field(foreign_key="orders.id", unique=True)
    carrier: str
    tracking_number: str
    status: str = "in_transit"  # in_transit | delivered
    shipped_at: Timestamp
    delivered_at: Timestamp | None = None


class DiscountCode(Base, table=True):
    __tablename__ = "discount_code"
    code: str = Field(primary_key=True)
    kind: str  # percent | fixed
    value: float  # percent off, or currency amount off
    min_spend: float = 0.0  # cart subtotal needed
    expires_at: Timestamp
    one_per_customer: bool = True
    active: bool = True


class DiscountRedemption(Base, table=True):
    __tablename__ = "discount_redemption"
    id: str = Field(primary_key=True)
    code: str = Field(foreign_key="discount_code.code")
    customer_id: str = Field(foreign_key="customer.id")
    order_id: str = Field(foreign_key="orders.id")
    redeemed_at: Timestamp


class ReturnRequest(Base, table=True):
    __tablename__ = "return_request"
    id: str = Field(primary_key=True)
    order_id: str = Field(foreign_key="orders.id")
    order_item_id: str = Field(foreign_key="order_item.id")
    product_id: str = Field(foreign_key="product.id")
    quantity: int = Field(ge=1)
    reason: str  # defective | wrong_item | changed_mind
    status: str = "approved"  # approved | refunded
    refund_amount: float
    created_at: Timestamp


class Refund(Base, table=True):
    id: str = Field(primary_key=True)
    order_id: str = Field(foreign_key="orders.id")
    return_id: str | None = Field(default=None, foreign_key="return_request.id")
    amount: float
    method: str  # card | store_credit
    reason: str
    created_at: Timestamp
