# %%
class Account:
    def __init__(self, owner, balance=0):
        self.owner = owner
        self.balance = balance

    def deposit(self, amount):
        self.balance += amount

    def withdraw(self, amount):
        if amount > self.balance:
            raise ValueError(f"{self.owner} cannot withdraw {amount}")
        self.balance -= amount

# %%
acct = Account("Mo", 100)
# the bank's export: signed amounts as text
ledger = ["+50", "-20", "+15", "-15"]

# %%
# Apply the ledger: "+" is a deposit, "-" a withdrawal
for entry in ledger:
    if entry.startswith("+"):
        acct.deposit(entry[1:])
    else:
        acct.withdraw(entry[1:])
print("balance:", acct.balance)
