n = int(input())
a = list(map(int, input().split()))
total = 0
for i in range(n):
    total = 0
    for j in range(i + 1):
        total += a[j]
print(total)
