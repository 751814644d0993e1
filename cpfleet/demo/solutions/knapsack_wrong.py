import sys

data = list(map(int, sys.stdin.read().split()))
n, cap = data[0], data[1]
items = sorted(((data[3 + 2 * i], data[2 + 2 * i]) for i in range(n)), key=lambda t: t[0] / t[1], reverse=True)
total = 0
for v, w in items:
    if w <= cap:
        cap -= w
        total += v
print(total)
