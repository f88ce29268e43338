# Exercise 1 - Average grade
# ---------------------------
# A teacher keeps the grades of a class in a list. Write `average(grades)` that
# returns the mean grade as a float. An empty class has an average of 0.0.
#
# The asserts at the bottom are the teacher's checks: do not change them.

grades_a = [12, 15, 9, 18]
grades_b = []


def average(grades):
    # TODO: add up the grades and divide by how many there are
    total = 0
    for g in grades:
        total = g
    return total / len(grades)


print("class A:", average(grades_a))
print("class B:", average(grades_b))

# --- teacher's checks (do not change) ---
assert average(grades_a) == 13.5, "class A should average 13.5"
assert average(grades_b) == 0.0, "an empty class averages 0.0"
assert isinstance(average([10]), float)
