# Pickling an instance of a class the program defines (looked up in __main__).
import pickle


class Account:
    def __init__(self, owner, balance):
        self.owner = owner
        self.balance = balance

    def __repr__(self):
        return f"Account({self.owner!r}, {self.balance})"


acct = Account("ada", 10)
data = pickle.dumps(acct)
back = pickle.loads(data)
print(back, type(back) is Account, back is not acct)
print(pickle.loads(pickle.dumps([acct, acct]))[1].owner)
