class Robot:
    def __init__(self):
        self.position = 0


r = Robot()
print(r.positon)
