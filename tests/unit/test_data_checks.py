"""Checks derived from the notebook's own data for a question about it.

The question's shape (for each GROUP the COLUMN with the highest MEASURE, a total or
an average per group, how many per group, per weekday) and the user's live frames give
the expected lines; a printed answer passes when each group is named with its answer on
one line. What the model may see (the source, the message) holds no value of the data.
"""

from __future__ import annotations

import contextlib
import io
import re

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


def test_row_labels_in_place_of_the_names_are_said_as_such():
    # what the embedded model printed for notebook 02's question: idxmax's row labels
    question = "For each month in sales, print the region with the highest sales."
    (result,) = run_checks(derive(question, {"sales": SALES}), "month\nfeb    3\njan    0\nmar    8\n")
    assert not result.passed and "3 show a whole number where the answer is a name" in result.message
    (wrong,) = run_checks(derive(question, {"sales": SALES}), "jan west\nfeb west\nmar west\n")
    assert "whole number" not in wrong.message  # a wrong name is no row label


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


# --------------------------------------------------------------------------- a line answers for one group
DF = pd.DataFrame(
    {
        "region": ["north", "south", "north", "east", "south", "east", "north"],
        "month": ["jan", "jan", "feb", "feb", "mar", "mar", "mar"],
        "sales": [120, 80, 95, 60, 130, 75, 110],
    }
)
BEST = "For each month in df, print the region with the highest sales."
BEST_ROWS = "best = df.loc[df.groupby('month', sort=False)['sales'].idxmax()]\n"
MERGED = "t = orders.merge(customers, on='customer_id')\n"
TOTALS = "Print the total amount each customer spent, by customer name."
COUNTS = "How many orders did each customer place? Print each customer's name and the count."


def printed_by(code: str, values: dict) -> str:
    """What ``code`` prints, run on copies of ``values`` (as the sandbox would)."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {"pd": pd, **{name: value.copy() for name, value in values.items()}})
    return out.getvalue()


@pytest.mark.parametrize(
    "question, code",
    [
        (BEST, "print(df.groupby('month').agg(list))"),
        (BEST, "print(df.to_dict())"),
        (BEST, BEST_ROWS + "print(best.to_dict())"),
        (BEST, "for m in df.month.unique():\n    print(m, *df.region.unique())"),
        (BEST, "print(df)"),  # every (month, region) pair, each on a line of its own
        (BEST, "for m in df.month.unique():\n    for r in df.region.unique():\n        print(m, r)"),
        (BEST, "print(list(zip(df.month, df.region)))"),  # every pair, on one line
        (BEST, BEST_ROWS + "print({m: list(df.region.unique()) for m in best.month})"),
        (COUNTS, "for name in customers.name:\n    print(name, 1, 2, 3)"),
        (COUNTS, "for name in customers.name:\n    for n in range(1, 4):\n        print(n, name)"),
    ],
    ids=[
        "agg-list",
        "frame-dict",
        "answer-dict",
        "all-regions",
        "whole-frame",
        "all-pairs",
        "all-pairs-one-line",
        "every-answer-dict",
        "all-counts",
        "count-lines",
    ],
)
def test_a_line_with_every_group_or_every_answer_answers_nothing(question, code):
    """Every group's key and every possible answer, on one line or spread over lines: each
    row's terms are somewhere together, yet nothing was answered. A line counts for a
    group when it names that group only, with its answer only."""
    values = {"df": DF, "customers": CUSTOMERS, "orders": ORDERS}
    checks = derive(question, values)
    (result,) = run_checks(checks, printed_by(code, values))
    assert not result.passed
    assert "one line per group" in result.message and "north" not in result.message


@pytest.mark.parametrize(
    "question, code",
    [
        (BEST, BEST_ROWS + "print(best)"),
        (BEST, BEST_ROWS + "print(best.to_string())"),
        (BEST, BEST_ROWS + "print(best.set_index('month')['region'])"),  # with its Name/dtype footer
        (BEST, BEST_ROWS + "for _, r in best.iterrows():\n    print(r.month.upper(), r.region.title())"),
        (
            BEST,
            BEST_ROWS
            + "print('Best region per month')\nfor _, r in best.iterrows():\n    print(f'In {r.month}, {r.region} sold the most.')",
        ),
        (BEST, BEST_ROWS + "print(best[['month', 'region']].to_csv(index=False))"),
        (TOTALS, MERGED + "print(t.groupby('name')['amount'].sum())"),
        (TOTALS, MERGED + "print(t.groupby('name', as_index=False)['amount'].sum().sort_values('amount'))"),
        (TOTALS, MERGED + "for n, v in t.groupby('name')['amount'].sum().items():\n    print(f'{n} spent ${v:,.2f}.')"),
        (COUNTS, MERGED + "print(t.groupby('name', as_index=False).size())"),  # row labels 0-2 are counts too
        (
            COUNTS,
            MERGED + "for i, (n, c) in enumerate(t.groupby('name').size().items(), 1):\n    print(f'{i}. {n}: {c}')",
        ),
        (COUNTS, MERGED + "print(t.groupby(['customer_id', 'name']).size())"),
        (BEST, BEST_ROWS + "print(best.set_index('month')['region'].to_dict())"),
        (TOTALS, MERGED + "print(t.groupby('name')['amount'].sum().to_dict())"),
        (COUNTS, MERGED + "print(t.groupby('name').size().to_dict())"),
    ],
    ids=[
        "frame",
        "to-string",
        "series",
        "letter-case",
        "sentences",
        "csv",
        "totals",
        "sorted-frame",
        "dollars",
        "counts-frame",
        "numbered",
        "id-and-name",
        "answer-dict",
        "totals-dict",
        "counts-dict",
    ],
)
def test_right_answers_in_the_forms_programs_print_them_pass(question, code):
    values = {"df": DF, "customers": CUSTOMERS, "orders": ORDERS}
    (result,) = run_checks(derive(question, values), printed_by(code, values))
    assert result.passed, result.message


def test_a_group_whose_name_holds_another_groups_name_is_one_group():
    sales = pd.DataFrame({"region": ["North", "North East", "North", "North East"], "sales": [1200, 800, 1300, 700]})
    question = "Print the total sales per region in sales."
    assert outcome(question, {"sales": sales}, "region\nNorth         2,500\nNorth East    1,500\n")
    assert not outcome(question, {"sales": sales}, "North 2500 North East 1500\n")


def test_numbers_keep_their_commas_between_thousands_only():
    revenue = pd.DataFrame({"year": [2021, 2021, 2022], "revenue": [1500.0, 250.5, 900.0]})
    question = "Print the total revenue per year in revenue."
    assert outcome(question, {"revenue": revenue}, "year,revenue\n2021,1750.5\n2022,900.0\n")  # CSV
    assert outcome(question, {"revenue": revenue}, "2021: 1,750.50\n2022: 900\n")
    assert not outcome(question, {"revenue": revenue}, "2021: 900\n2022: 1750.5\n")


def test_a_day_is_printed_as_its_date():
    days = pd.DataFrame(
        {
            "day": pd.to_datetime(["2024-01-01", "2024-01-01", "2024-01-02"]),
            "region": ["a", "b", "a"],
            "sales": [3, 1, 5],
        }
    )
    question = "For each day in days, print the region with the highest sales."
    assert outcome(question, {"days": days}, "2024-01-01 a\n2024-01-02 a\n")


def test_answers_that_are_groups_too_read_the_first_as_the_group():
    games = pd.DataFrame(
        {
            "team": ["a", "a", "b", "b", "c", "c"],
            "opponent": ["b", "c", "a", "c", "a", "b"],
            "points": [3, 5, 7, 1, 2, 9],
        }
    )
    question = "For each team in games, print the opponent with the highest points."
    assert outcome(question, {"games": games}, "team a: c\nteam b: a\nteam c: b\n")
    assert not outcome(question, {"games": games}, "a b c\nb a c\nc a b\n")


def test_the_best_by_total_by_average_or_by_one_sale_is_what_the_words_say():
    """jan: north sold 60 + 50 (the highest total), south 100 (the highest sale and average)."""
    df = pd.DataFrame(
        {
            "month": ["jan"] * 3 + ["feb"] * 2,
            "region": ["north", "north", "south", "north", "south"],
            "sales": [60, 50, 100, 10, 20],
        }
    )
    values = {"df": df}
    average = "For each month in df, print the region with the highest average sales."
    assert outcome(average, values, "jan south\nfeb south\n")
    assert not outcome(average, values, "jan north\nfeb south\n")
    total = "For each month in df, print the region with the highest total sales."
    assert outcome(total, values, "jan north\nfeb south\n")
    # "the highest sales": a total or one sale; they differ in jan, so either answer is right
    assert derive("For each month in df, print the region with the highest sales.", values) == []


def test_the_weekdays_the_data_holds_are_not_all_seven():
    question = "Print the weekdays of the dates in visits, by name."
    assert outcome(question, {"visits": VISITS}, "Monday\nTuesday\nFriday\n")
    week = "Monday\nTuesday\nWednesday\nThursday\nFriday\nSaturday\nSunday\n"
    assert not outcome(question, {"visits": VISITS}, week)
    assert outcome(question, {"visits": VISITS}, "Monday, Tuesday, Friday\n")  # a list on one line: its items
    assert not outcome(question, {"visits": VISITS}, week.replace("\n", ", "))


def test_groups_the_same_but_for_case_are_not_checked():
    sales = pd.DataFrame({"region": ["North", "north", "South"], "sales": [1, 2, 3]})
    assert derive("Print the total sales per region in sales.", {"sales": sales}) == []


@pytest.mark.parametrize(
    "question",
    [
        "For each month in sales, print the region with the highest sales, excluding north.",
        "For each month in sales, print the region with the highest sales in 2024.",
        "Print the total amount each customer spent on orders over 20, by customer name.",
        "Print the total amount each customer spent, by customer name, for Tom Berg and Aiko Sato only.",
        "Print the total amount each customer spent as a percentage of all orders, by customer name.",
        "Print the average amount per customer name, rounded to whole numbers.",
        "Print the number of distinct customers per name.",
    ],
)
def test_a_question_that_narrows_or_transforms_its_answer_gets_no_check(question):
    """The check computes the plain answer: held against it, the right answer to a
    filtered, shared or rounded question would be refused and the plain one verified."""
    values = {"sales": SALES, "customers": CUSTOMERS, "orders": ORDERS}
    assert derive(question, values) == []
    plain = re.sub(
        r"(, excluding north| in 2024| on orders over 20|, for Tom.*only| as a percentage of all orders)", "", question
    )
    if plain != question:
        assert derive(plain, values), plain


@pytest.mark.parametrize(
    "question",
    [
        "Print the total sales for each month and region.",
        "Print the total sales by month, then by region.",
        "For each month in sales, print the region with the highest sales per unit.",
        "How many units were sold in each month?",
        "Print the number of regions per month.",
    ],
)
def test_a_question_grouped_twice_or_counting_a_column_gets_no_check(question):
    """The check groups by one column and counts rows: per month and region, sales per
    unit, the units sold (a total) or the regions (distinct values) are other answers."""
    sales = SALES.assign(units=[3, 1, 2, 5, 1, 1, 2, 2, 4])
    assert derive(question, {"sales": sales}) == []
    assert derive("Print the total sales per month, sorted by sales.", {"sales": sales})  # an order, not a group


def test_a_blank_value_in_the_column_is_no_answer_beside_each_line():
    df = pd.DataFrame(
        {
            "month": ["jan", "jan", "feb", "feb", "feb"],
            "region": ["north", "", "south", "north", " "],
            "sales": [300, 10, 200, 100, 5],
        }
    )
    question = "For each month in df, print the region with the highest sales."
    assert outcome(question, {"df": df}, "jan: north\nfeb - south\n")


def printed_by_program(program: str, values: dict) -> str:
    """What ``program`` prints, run as Insert below runs it; it binds no name of its own
    (a frame it bound would be the next question's data), ``pd`` aside."""
    ns = {name: value.copy() for name, value in values.items()}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(program, ns)
    assert set(ns) - set(values) <= {"__builtins__", "pd"}, sorted(ns)
    return out.getvalue()


@pytest.mark.parametrize(
    "question, values",
    [
        ("For each month in sales, print the region with the highest sales.", {"sales": SALES}),
        ("For each month in sales, print the region with the lowest sales.", {"sales": SALES}),
        ("Print the total amount each customer spent, by customer name.", {"customers": CUSTOMERS, "orders": ORDERS}),
        (
            "How many orders did each customer place? Print each customer's name and the count.",
            {"customers": CUSTOMERS, "orders": ORDERS},
        ),
        ("Print the average amount per customer_id in orders.", {"orders": ORDERS}),
        ("Count the rows of visits per weekday (by name).", {"visits": VISITS}),
        ("Print the weekdays of the dates in visits, by name.", {"visits": VISITS}),
    ],
    ids=["best", "worst", "total-by-name", "count-by-name", "average", "weekday-counts", "weekdays"],
)
def test_the_tools_own_program_answers_the_question_as_its_check_reads_it(question, values):
    """Issue 40: after a refused answer the loop runs this program (``data_answers``): it
    passes its own check, reads the frames by name, changes none of them and holds no
    value of the data."""
    (check,) = derive(question, values)
    kept = {name: value.copy() for name, value in values.items()}
    (result,) = run_checks([check], printed_by_program(check.program, values))
    assert result.passed, (check.program, result.message)
    assert all(values[name].equals(kept[name]) for name in values)
    for row in check.rows:
        assert not any(str(term) in check.program for term in row if len(str(term)) > 2)


def test_no_program_where_its_printed_keys_would_not_read_as_the_checks():
    days = pd.DataFrame({"day": pd.to_datetime(["2024-01-01", "2024-01-02"]), "sales": [3, 5]})
    (check,) = derive("Print the total sales per day in days.", {"days": days})
    assert check.program == ""


# --------------------------------------------------------------------------- what the check does not read
SHOP = pd.DataFrame(
    {
        "region": ["north", "south", "north", "east", "south", "east", "north", "north", "south"],
        "month": ["jan", "jan", "feb", "feb", "mar", "mar", "mar", "jan", "feb"],
        "sales": [120, 80, 95, 60, 130, 75, 110, 5, 90],
        "customer_id": [1, 2, 1, 3, 2, 3, 1, 1, 2],
        "date": [
            f"2024-0{m}-0{d}" for m, d in [(1, 8), (1, 9), (2, 5), (2, 6), (3, 4), (3, 5), (3, 6), (1, 2), (2, 7)]
        ],
    }
)


@pytest.mark.parametrize(
    "question",
    [
        "Which region had the highest total sales in each month?",
        "Print the top region per month by total sales.",
        "For each month, print the highest total sales.",
        "How many times did each region have the highest sales?",
        "Print the total sales per weekday in shop.",
        "Which weekday has the most sales in shop?",
        "Print the average sales by day of the week in shop.",
        "Print the total sales by month and by region.",
        "Print the total sales by region & month.",
        "For each month in shop, print the region with the highest sales count.",
        "Print the average sales per customer for each region.",
        "How many customers bought something in each month in shop?",
        "Print the total sales of each region's best month.",
        "For each month, print the total sales and the best region.",
        "Print the number of rows per month in shop, sorted by sales.",
    ],
)
def test_a_question_asking_more_than_its_check_reads_gets_none(question):
    """Red team of the tool's own program: each of these was read as a plain total, count
    or weekday list (a column, a superlative or a count in the words left unread), and the
    tool's program printed that plain answer "verified by checks from your data"."""
    assert derive(question, {"shop": SHOP}) == []


def test_the_columns_a_check_reads_are_the_ones_its_question_names():
    for question in (
        "For each month in shop, print the region with the highest total sales.",
        "Print the total sales per region in shop.",
        "How many rows per month are in shop?",
        "Count the rows of shop per weekday of its date column.",
    ):
        assert derive(question, {"shop": SHOP}), question


@pytest.mark.parametrize(
    "question",
    [
        "Print the average monthly sales per region.",
        "Print the total sales per region, ignoring negative sales.",
        "Print the average sales per region, ignoring zeros.",
        "Print the total sales per region in the latest week.",
        "Print the total sales per month in shop in k$.",
        "Plot the total sales per month in shop.",
        "Write a function that returns the total sales per region in shop.",
        "Add a column to shop with the total sales per region.",
    ],
)
def test_a_question_whose_answer_is_no_plain_printed_line_gets_no_check(question):
    """Each was checked as the plain total or average, and the tool's program printed it
    "verified": a monthly average is not the average row, a function that returns or a
    plot is no printed line."""
    assert derive(question, {"shop": SHOP}) == []


@pytest.mark.parametrize(
    "question",
    [
        "Print the average price per category in items, from the most expensive category to the cheapest.",
        "Print the average price per category in items, sorted by price.",
        "Print the average price per category in items in descending order.",
        "Print the average price per category in items as a dict.",
    ],
)
def test_an_order_or_a_form_asked_for_keeps_the_check_but_not_the_tools_program(question):
    """The check reads each group's line in any order or form; the tool's program prints
    plain lines in the groups' own order: "verified" it would answer the cheapest first."""
    items = pd.DataFrame({"category": ["a", "b", "c"], "price": [1.0, 50.0, 9.0]})
    (check,) = derive(question, {"items": items})
    assert check.program == ""
    (plain,) = derive("Print the average price per category in items.", {"items": items})
    assert plain.program


def test_the_most_sales_may_be_the_most_of_them():
    """North sold the largest total and the largest sale in January, south sold most
    often: "the region with the most sales" is read three ways, none checked."""
    shop = pd.DataFrame({"month": ["jan"] * 3, "region": ["north", "south", "south"], "sales": [100, 10, 20]})
    assert derive("For each month in shop, print the region with the most sales.", {"shop": shop}) == []
    assert derive("For each month in shop, print the region with the highest sales.", {"shop": shop})


def test_no_program_that_would_print_a_total_its_own_check_cannot_read():
    """Python prints 4e+20 for a float total that large; the tool's program failed its own
    check ("3 of 3 expected lines are not printed") in a round the user sees."""
    big = pd.DataFrame({"month": ["jan", "jan", "feb"], "sales": [1e20, 2e20, 4e20]})
    (check,) = derive("Print the total sales per month in big.", {"big": big})
    assert check.program == ""
    small = big.assign(sales=big.sales / 1e10)
    (check,) = derive("Print the total sales per month in small.", {"small": small})
    assert run_checks([check], printed_by_program(check.program, {"small": small}))[0].passed


@pytest.mark.parametrize(
    "question",
    [
        "For each month in shop, print the region with the highest sales, and how much it sold.",
        "Print the total sales per region with the region names in upper case.",
        "Print the total sales per region, then a line with the sum of them all.",
    ],
)
def test_a_question_with_words_the_shape_does_not_read_gets_no_tool_program(question):
    """The check reads one line per group and lets a line say more; the tool's program
    prints the plain answer only, so it would leave out what these words ask for and
    still end "verified"."""
    (check,) = derive(question, {"shop": SHOP})
    assert check.program == ""


def test_dates_pandas_would_drop_leave_the_weekdays_unchecked():
    """ "2024-05-07 10:30" beside "2024-05-06": pandas reads the column in the first
    value's form and drops the others (errors="coerce"); the check and the tool's program
    both counted 3 of 5 visits, "verified"."""
    visits = pd.DataFrame({"date": ["2024-05-06", "2024-05-07", "2024-05-07 10:30", "2024-05-11T08:00:00"]})
    assert derive("Count the rows of visits per weekday (by name).", {"visits": visits}) == []
    assert derive("Count the rows of visits per weekday (by name).", {"visits": visits.head(2)})


def test_frames_joined_many_to_many_are_not_checked():
    """A customer listed twice: the merge repeats each of their orders, and the check and
    the tool's program both said Tom Berg spent 75 in 4 orders (37.5 in 2), "verified"."""
    twice = pd.concat([CUSTOMERS, CUSTOMERS.iloc[[1]]], ignore_index=True)
    for question in (TOTALS, COUNTS):
        assert derive(question, {"customers": twice, "orders": ORDERS}) == []
        assert derive(question, {"customers": CUSTOMERS, "orders": ORDERS})


def test_a_customer_with_no_orders_leaves_the_joined_answer_unchecked():
    """The merge drops a customer with no orders: the check and the tool's program left
    them out, "verified", where they placed 0 orders and spent 0."""
    new = pd.concat([CUSTOMERS, pd.DataFrame({"customer_id": [104], "name": ["Ines Roth"]})], ignore_index=True)
    for question in (TOTALS, COUNTS):
        assert derive(question, {"customers": new, "orders": ORDERS}) == []


@pytest.mark.parametrize(
    "question",
    ["Print the weekday of each date in visits.", "What weekday is every row of visits?"],
)
def test_the_weekday_of_each_date_is_no_list_of_the_weekdays(question):
    """One weekday per row: the tool's program printed each weekday once ("Monday",
    "Tuesday", "Friday" for four visits), "verified"."""
    (check,) = derive(question, {"visits": VISITS})
    assert check.program == ""
    (listed,) = derive("Print the weekdays of the dates in visits, by name.", {"visits": VISITS})
    assert listed.program


def test_a_count_of_one_frame_among_rows_of_another_is_not_checked():
    """The orders were counted per region where the words count customers (those who
    placed orders): north 3 for 2 customers, "verified"."""
    customers = CUSTOMERS.assign(region=["north", "south", "north"])
    values = {"customers": customers, "orders": ORDERS}
    assert derive("How many customers per region placed orders?", values) == []
    (check,) = derive("How many orders per region did customers place?", values)
    assert sorted(check.rows) == [["north", "3"], ["south", "2"]]


def test_the_frame_the_question_names_is_the_one_read():
    """The context's names are a set: with a filtered copy of ``df`` beside it (its columns
    named by the question too), "for each month in df" read ``recent`` in some kernels,
    and the tool's program answered for it (no March), verified."""
    recent = DF[DF.month != "mar"]
    (check,) = derive(BEST, {"recent": recent, "df": DF})
    assert check.source.startswith("from your data: each `month` of `df`") and len(check.rows) == 3
    assert "recent" not in check.program
    # two frames the question names, each holding the column: which one it means is unsaid
    sales = DF.copy()
    assert derive("For each month in df, print the region with the highest sales.", {"sales": sales, "df": DF}) == []


def test_a_question_asking_the_measure_too_gets_no_tool_program():
    """The check reads month and region on a line and lets it say more; the tool's
    program printed the region alone where the words ask for its sales."""
    (check,) = derive("For each month in df, print the sales of the region with the highest sales.", {"df": DF})
    assert check.program == ""
    (named,) = derive("For each month in sales, print the region with the highest sales.", {"sales": SALES})
    assert named.program


@pytest.mark.parametrize(
    "question", ["How many weekdays are in visits?", "What is the number of days of the week in visits?"]
)
def test_a_number_of_weekdays_is_no_count_per_weekday(question):
    """The tool's program printed the visits per weekday, verified, where the words ask
    how many weekdays there are."""
    assert derive(question, {"visits": VISITS}) == []
    assert derive("How many rows per weekday are in visits?", {"visits": VISITS})


def test_all_on_one_line_gets_no_tool_program():
    (check,) = derive("Print the total sales per region in shop, in one line.", {"shop": SHOP})
    assert check.program == ""


def test_a_count_column_is_not_the_rows_counted():
    """``value_counts().reset_index()`` names its column ``count``: "the count for each
    region in counts" is that column, and the tool's program printed 1 row per region,
    verified (the frame's name, said as "count", hid the column)."""
    counts = DF.region.value_counts().reset_index()
    assert derive("Print the count for each region in counts.", {"counts": counts}) == []


def test_the_lowest_where_a_group_lacks_an_answer_is_not_checked():
    """East sold nothing in January: "the region with the lowest sales" may be east (none)
    or the lowest of those that sold; the tool's program said south, verified."""
    assert "east" not in set(DF[DF.month == "jan"].region)
    assert derive("For each month in df, print the region with the lowest sales.", {"df": DF}) == []
    assert derive("For each month in sales, print the region with the lowest sales.", {"sales": SALES})
