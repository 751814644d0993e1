a, b = map(int, input().split())
s = a
for _ in range(b):
    s += 1
print(s)
