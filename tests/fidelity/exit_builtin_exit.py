print("calling exit()")
exit()
print("never")
