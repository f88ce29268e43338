# Exercise 9 - Shopping cart
# --------------------------
# A cart is a list of (item, unit_price, quantity). `cart_total(cart)` returns the
# total price; when the total is above 100 a 10% discount applies. The result is
# rounded to 2 decimals.
#
# The asserts were written by the teacher: leave them as they are.

cart = [("pen", 1.5, 4), ("notebook", 3.2, 5), ("bag", 35.0, 1)]
big_cart = [("laptop stand", 45.0, 2), ("lamp", 20.0, 1)]


def cart_total(cart):
    total = 0
    for item, price, quantity in cart:
        # TODO: take the quantity into account
        total += price
    if total >= 100:
        total = total * 0.1
    return round(total, 2)


print("cart:", cart_total(cart))
print("big cart:", cart_total(big_cart))

# teacher's checks (do not change)
assert cart_total(cart) == 57.0
assert cart_total(big_cart) == 99.0
assert cart_total([]) == 0
