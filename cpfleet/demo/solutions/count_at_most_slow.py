import sys

data = sys.stdin.buffer.read().split()
n, q = int(data[0]), int(data[1])
a = list(map(int, data[2:2 + n]))
for x in data[2 + n:2 + n + q]:
    x = int(x)
    c = 0
    for v in a:
        if v <= x:
            c += 1
    print(c)
