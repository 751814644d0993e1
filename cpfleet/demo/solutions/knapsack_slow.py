import sys

data = list(map(int, sys.stdin.read().split()))
n, cap = data[0], data[1]
items = [(data[2 + 2 * i], data[3 + 2 * i]) for i in range(n)]

def go(i: int, room: int) -> int:
    if i == n:
        return 0
    w, v = items[i]
    skip = go(i + 1, room)
    return max(skip, v + go(i + 1, room - w)) if w <= room else skip

print(go(0, cap))
