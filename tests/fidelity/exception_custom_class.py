class InsufficientFunds(Exception):
    def __init__(self, need, have):
        super().__init__(f"need {need}, have {have}")
        self.need, self.have = need, have


class Wallet:
    def __init__(self, money):
        self.money = money

    def pay(self, amount):
        if amount > self.money:
            raise InsufficientFunds(amount, self.money)
        self.money -= amount


w = Wallet(5)
w.pay(3)
w.pay(3)
