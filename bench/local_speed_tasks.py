"""The fixed task set of ``bench/local_model.py``: what a class would heal.

Three 30–60-line beginner exercises (a script with several TODOs and its own
asserts, some of them also with a plain bug), a HumanEval-style function written
from its docstring, and a pandas repair. Each is a :class:`~selfheal_jupyter.model.Task`
as ``%%heal`` / ``%%agent`` build it.
"""

from __future__ import annotations

from selfheal_jupyter.model import Task

GRADES = '''\
# Exercise: grade book. Complete every TODO so that the checks at the end pass.

scores = {
    "ana": [78, 92, 85],
    "ben": [55, 61, 48],
    "carla": [90, 95, 99],
    "dev": [],
}


def average(values):
    """Mean of a list of numbers; 0.0 for an empty list."""
    # TODO: return the mean, and 0.0 when values is empty
    return sum(values) / len(values)


def letter(avg):
    """A for 90 and above, B for 80-89, C for 70-79, D for 60-69, F below 60."""
    # TODO: implement the grading scale
    pass


def report(book):
    """A dict name -> (average rounded to 1 decimal, letter)."""
    result = {}
    for name, marks in book.items():
        avg = round(average(marks), 1)
        # TODO: store the pair (avg, letter(avg)) under name
    return result


def best_student(book):
    """The name with the highest average."""
    # TODO: return the name with the highest average
    return None


table = report(scores)
for name, (avg, grade) in sorted(table.items()):
    print(f"{name:6} {avg:5.1f} {grade}")
print("best:", best_student(scores))

assert average([]) == 0.0
assert letter(95) == "A" and letter(85) == "B" and letter(59.9) == "F"
assert table["ben"] == (54.7, "F")
assert best_student(scores) == "carla"
'''

INVENTORY = '''\
# Exercise: a small shop inventory. Fix the bug and complete the TODOs.


class Inventory:
    def __init__(self):
        self.items = {}  # name -> [price, quantity]

    def add(self, name, price, quantity=1):
        """Add quantity of an item; a known item keeps its price and gains quantity."""
        if name in self.items:
            self.items[name][1] += quantity
        else:
            self.items[name] = [price, quantity]

    def remove(self, name, quantity=1):
        """Take quantity away; raise ValueError if there is not enough stock."""
        # TODO: raise ValueError when the item is unknown or stock is too low
        self.items[name][1] -= quantity
        # TODO: drop the item entirely when its quantity reaches 0

    def total_value(self):
        """Sum of price * quantity over all items."""
        total = 0
        for price, quantity in self.items.values():
            total += price * quantity
        return totl

    def cheapest(self):
        """Name of the cheapest item, or None when empty."""
        # TODO: implement
        pass


shop = Inventory()
shop.add("pen", 1.5, 10)
shop.add("book", 12.0, 2)
shop.add("pen", 1.5, 5)
shop.remove("book", 2)
print("value:", shop.total_value())
print("cheapest:", shop.cheapest())

assert shop.items == {"pen": [1.5, 15]}
assert shop.total_value() == 22.5
assert shop.cheapest() == "pen"
try:
    shop.remove("pen", 100)
    raise AssertionError("removing too many must fail")
except ValueError:
    pass
assert Inventory().cheapest() is None
'''

TEXTSTATS = '''\
# Exercise: statistics of a text. Complete the TODOs; keep the checks.

TEXT = """The quick brown fox jumps over the lazy dog. The dog sleeps.
A fox is quick, and the dog is lazy!"""


def words(text):
    """Lower-case words without punctuation."""
    cleaned = []
    for raw in text.split():
        word = raw.strip(".,!?").lower()
        if word:
            cleaned.append(word)
    return cleaned


def frequencies(text):
    """A dict word -> count."""
    counts = {}
    # TODO: count every word of words(text)
    return counts


def most_common(text, n):
    """The n most frequent words as (word, count), highest first, ties alphabetical."""
    # TODO: sort frequencies(text) by count (descending) then word
    return []


def sentences(text):
    """The sentences of the text, stripped, without empty ones."""
    # TODO: split on '.', '!' and '?'
    return [text]


print(most_common(TEXT, 3))
print(len(sentences(TEXT)), "sentences")

assert frequencies("a b a")["a"] == 2
assert most_common(TEXT, 2) == [("the", 4), ("dog", 3)]
assert len(sentences(TEXT)) == 3
assert sentences("Hi. Bye!") == ["Hi", "Bye"]
'''

HUMANEVAL_PROMPT = '''\
Write the function below.

def separate_paren_groups(paren_string: str) -> list[str]:
    """Input is a string containing multiple groups of nested parentheses. Separate
    those groups into separate strings and return the list of those. Separate groups
    are balanced (each open brace is properly closed) and not nested within each
    other. Ignore any spaces in the input string.
    >>> separate_paren_groups('( ) (( )) (( )( ))')
    ['()', '(())', '(()())']
    """
'''
HUMANEVAL_TESTS = """\
assert separate_paren_groups('(()()) ((())) () ((())()())') == ['(()())', '((()))', '()', '((())()())']
assert separate_paren_groups('() (()) ((())) (((())))') == ['()', '(())', '((()))', '(((())))']
assert separate_paren_groups('(()(())((())))') == ['(()(())((())))']
assert separate_paren_groups('( ) (( )) (( )( ))') == ['()', '(())', '(()())']
"""

PANDAS = """\
# Exercise: sales by region. Fix the program and complete the TODOs.
import pandas as pd

sales = pd.DataFrame({
    "region": ["north", "south", "north", "east", "south", "east", "north"],
    "product": ["tea", "tea", "coffee", "tea", "coffee", "coffee", "tea"],
    "price": [3.0, 3.0, 4.5, 3.0, 4.5, 4.5, 3.0],
    "units": [10, 4, 6, 8, 5, 0, 2],
})

sales["revenue"] = sales["Price"] * sales["units"]

# TODO: total revenue per region, as a Series named by_region, highest first
by_region = None

# TODO: the region with the highest revenue
top_region = None

# TODO: rows with zero units removed, index reset
active = sales

print(by_region)
print("top:", top_region)

assert list(by_region.index) == ["north", "south", "east"]
assert by_region["north"] == 63.0
assert top_region == "north"
assert len(active) == 6 and list(active.index) == list(range(6))
"""

TASKS: dict[str, Task] = {
    "grades": Task(prompt="Complete the TODOs so that the program runs and its asserts pass.",
                   initial_code=GRADES),
    "inventory": Task(prompt="Fix the bug and complete the TODOs so that the asserts pass.",
                      initial_code=INVENTORY),
    "textstats": Task(prompt="Complete the TODOs so that the program runs and its asserts pass.",
                      initial_code=TEXTSTATS),
    "parens": Task(prompt=HUMANEVAL_PROMPT, tests=HUMANEVAL_TESTS),
    "pandas": Task(prompt="Fix the program and complete the TODOs so that the asserts pass.",
                   initial_code=PANDAS),
}  # fmt: skip
