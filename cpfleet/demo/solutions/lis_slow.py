n = int(input())
a = list(map(int, input().split()))
best = [1] * n
for i in range(n):
    for j in range(i):
        if a[j] < a[i] and best[j] + 1 > best[i]:
            best[i] = best[j] + 1
print(max(best))
