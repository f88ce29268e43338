# Apply the ledger: "+" is a deposit, "-" a withdrawal
for entry in ledger:
    if entry.startswith("+"):
        acct.deposit(int(entry[1:]))
    else:
        acct.withdraw(int(entry[1:]))
print("balance:", acct.balance)
