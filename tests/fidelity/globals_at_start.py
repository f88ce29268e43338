print(sorted(globals()))
