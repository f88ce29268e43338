"""Checks derived from the notebook's own data for a question about it.

The question's shape (for each GROUP the COLUMN with the highest MEASURE, a total or
an average per group, how many per group, per weekday) and the user's live frames give
the expected lines; a printed answer passes when each group is named with its answer on
one line. What the model may see (the source, the message) holds no value of the data.
"""

from __future__ import annotations

import pandas as pd
import pytest

from selfheal_jupyter.agents.data_checks import derive, run_checks

SALES = pd.DataFrame(
    {
        "month": ["jan", "jan", "jan", "feb", "feb", "feb", "mar", "mar", "mar"],
        "region": ["north", "south", "west", "north", "south", "west", "north", "south", "west"],
        "sales": [310, 120, 95, 180, 260, 90, 140, 150, 330],
    }
)
CUSTOMERS = pd.DataFrame({"customer_id": [101, 102, 103], "name": ["Maria Lopez", "Tom Berg", "Aiko Sato"]})
ORDERS = pd.DataFrame({"customer_id": [102, 101, 102, 103, 101], "amount": [25.0, 40.5, 12.5, 99.0, 10.0]})
VISITS = pd.DataFrame({"date": ["2024-05-06", "2024-05-06", "2024-05-07", "2024-05-10"], "who": ["a", "b", "c", "d"]})


def outcome(question: str, values: dict, printed: str) -> bool:
    checks = derive(question, values)
    assert len(checks) == 1, checks
    (result,) = run_checks(checks, printed)
    return result.passed


@pytest.mark.parametrize(
    "printed, right",
    [
        ("jan north\nfeb south\nmar west\n", True),
        ("The region with the highest sales in Feb is South.\nJan: north\nmar -> west\n", True),
        ("jan west\nfeb west\nmar west\n", False),  # the alphabetically last region
        ("The region with the highest sales in 0 is north.\n1 south\n2 west\n", False),  # row indices
    ],
)
def test_the_best_of_each_group(printed, right):
    question = "For each month in sales, print the region with the highest sales."
    assert outcome(question, {"sales": SALES}, printed) is right


def test_a_total_per_name_joins_the_frames_on_their_shared_column():
    question = "Print the total amount each customer spent, by customer name."
    values = {"customers": CUSTOMERS, "orders": ORDERS}
    assert outcome(question, values, "Maria Lopez: 50.50\nTom Berg: 37.50\nAiko Sato: 99.00\n")
    assert not outcome(question, values, "101 50.5\n102 37.5\n103 99.0\n")  # ids, not names
    assert not outcome(question, values, "Alice 10\nBob 20\n")  # a table of its own


def test_counts_per_name_and_per_weekday():
    values = {"customers": CUSTOMERS, "orders": ORDERS}
    question = "How many orders did each customer place? Print each customer's name and the count."
    assert outcome(question, values, "Maria Lopez 2\nTom Berg 2\nAiko Sato 1\n")
    assert not outcome(question, values, "Maria Lopez 1\nTom Berg 2\nAiko Sato 1\n")
    weekday = "Count the rows of visits per weekday (by name)."
    assert outcome(weekday, {"visits": VISITS}, "Monday 2\nTuesday 1\nFriday 1\n")
    assert not outcome(weekday, {"visits": VISITS}, "0 2\n1 1\n4 1\n")  # weekdays as 0-6


def test_an_average_matches_to_the_decimals_printed():
    items = pd.DataFrame({"category": ["a", "a", "b"], "price": [1.0, 2.0, 3.25]})
    question = "Print the average price per category in items."
    assert outcome(question, {"items": items}, "a 1.5\nb 3.25\n")
    assert outcome(question, {"items": items}, "a: 1.50\nb: 3.2\n")  # 3.25 to one decimal
    assert not outcome(question, {"items": items}, "a 2\nb 3\n")


def test_what_the_model_may_see_holds_no_value():
    checks = derive("For each month in sales, print the region with the highest sales.", {"sales": SALES})
    (result,) = run_checks(checks, "nothing useful\n")
    shown = checks[0].source + result.message
    for value in ("jan", "north", "south", "west", "310"):
        assert value not in shown
    assert shown.startswith("from your data: each `month` of `sales` with the `region` of highest `sales`")
    assert "3 of 3 expected lines are not printed" in result.message


@pytest.mark.parametrize(
    "question",
    [
        "Plot the sales per month.",  # nothing to check in print
        "Print the mean of 1, 2 and 3.",
        "For each month in sales, print the region with the lowest sales.",  # mar: 140/150/330, no tie → checked
    ],
)
def test_questions_without_a_shape_read_here_get_no_check(question):
    checks = derive(question, {"sales": SALES})
    assert bool(checks) == ("lowest" in question)


def test_a_tie_leaves_the_answer_to_the_program():
    tied = pd.DataFrame({"month": ["jan", "jan"], "region": ["a", "b"], "sales": [5, 5]})
    assert derive("For each month in tied, print the region with the highest sales.", {"tied": tied}) == []
