import gc

print(gc.isenabled(), gc.get_threshold(), gc.get_freeze_count())
