n = int(input())
print(*sorted(input().split()))
