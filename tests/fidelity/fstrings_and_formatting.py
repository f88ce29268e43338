value, name = 3.14159, "pi"
print(f"{name=} {value:.2f} {value!r:>10} {1234567:,} {0.25:.0%} {255:#x} {'x':*^7}")
print("%s has %d chars, %5.1f%%" % (name, len(name), 12.345))
print("{0} {1} {0}".format("a", "b"), format(1e-7, "g"), str(1 / 3))
