import sys

data = sys.stdin.read().split()
for i in range(int(data[0])):
    a, b = int(data[1 + 2 * i]), int(data[2 + 2 * i])
    x, y = a, b
    while x != y:
        if x > y:
            x -= y
        else:
            y -= x
    print(x, a // x * b)
