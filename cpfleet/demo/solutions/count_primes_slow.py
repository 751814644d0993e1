n = int(input())
count = 0
for k in range(2, n + 1):
    d = 2
    while d * d <= k and k % d:
        d += 1
    if d * d > k:
        count += 1
print(count)
